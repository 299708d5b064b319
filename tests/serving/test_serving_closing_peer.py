"""A peer that accepts a connection and closes it at once (`kubectl port-forward` to a pod that is restarting, a
proxy in front of a Triton still starting) is "not ready yet", not "the wrong port": `check` must keep waiting
for it. geventhttpclient raises HTTPConnectionClosed there, an http.client.HTTPException like the parse error
a gRPC port gives, and the wrong-port diagnosis took both for a gRPC port and gave up at once."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from serving.client import SentimentClient
from serving.errors import UnavailableError


@pytest.fixture
def closing_peer() -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    listener.close()


def test_a_peer_that_closes_the_connection_is_waited_for_not_called_the_wrong_port(closing_peer: str) -> None:
    client = SentimentClient(closing_peer, protocol="http", timeout_s=1.0, retries=0)
    with pytest.raises(UnavailableError) as err:
        client.wait_ready(timeout_s=1.5)
    assert "not ready after" in str(err.value)
    assert "gRPC port" not in str(err.value)
