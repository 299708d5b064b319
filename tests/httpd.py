"""A test's own HTTP server on a free loopback port, for the fakes the tests write as http.server handlers.

`with http_server(Handler) as served:` binds 127.0.0.1 port 0 (the OS picks a free port, so no race with other
servers), serves on a daemon thread and, on leaving, stops serving, closes the listening socket and joins the
thread: a test that fails half-way leaves neither a port nor a thread behind.

Each request runs on a daemon thread (ThreadingHTTPServer's default), so closing does not wait for a handler that
hangs on purpose (a stuck peer); a test whose handler waits on an event sets it before the block ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from socketserver import BaseRequestHandler


@dataclass(frozen=True)
class Served:
    server: ThreadingHTTPServer
    port: int

    @property
    def address(self) -> str:
        """host:port, as registries and gRPC-style clients take it."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"


@contextmanager
def http_server(handler: Callable[..., BaseRequestHandler]) -> Iterator[Served]:
    """`handler`: a BaseHTTPRequestHandler subclass, or a factory of one (functools.partial with its options)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(server, int(server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
