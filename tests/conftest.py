"""Fixtures shared across the test suite.

Component-specific fixtures live beside their tests (tests/<component>/conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

import localservers
from localservers import free_port
from tests.httpd import http_server

__all__ = ["free_port", "pick_first"]

_UNTRACKED = pytest.StashKey[frozenset[str] | None]()


def pick_first(monkeypatch: pytest.MonkeyPatch, *ports: int) -> None:
    """localservers.free_port hands out `ports` first (taken since the pick, as by another process; 0: a free one
    there), then free ones."""
    picks, real = iter(ports), localservers.free_port
    monkeypatch.setattr(localservers, "free_port", lambda: next(picks, None) or real())


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A port that accepts connections and never answers, handed out by the first free_port pick."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = int(sock.getsockname()[1])
        pick_first(monkeypatch, port)
        yield port


class _Stranger(BaseHTTPRequestHandler):
    """Answers 200 to everything (readiness paths included), as another test's server on that port would."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stranger() -> Iterator[int]:
    """The port of an HTTP server that answers 200 to everything: a stranger a starter must not take for its own."""
    with http_server(_Stranger) as served:
        yield served.port


def _main_thread_loop() -> asyncio.AbstractEventLoop | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            return None


@pytest.fixture(autouse=True)
def main_thread_event_loop() -> Iterator[None]:
    """A test leaves the main thread's event loop as it found it. adlfs (az://) sets it to fsspec's IO loop,
    which fsspec runs in its own thread: every later Pulumi program in this process (the infra plans) then
    sees a "running" loop it is not inside and fails with "no running event loop"."""
    before = _main_thread_loop()
    yield
    if _main_thread_loop() is not before:
        asyncio.set_event_loop(before)


@pytest.fixture(scope="session")
def committed_plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every committed stack's offline plan in preview, rendered once per session for tests/infra and
    tests/foundation alike (the cloud SDKs' import and five renders cost 10-20 s on 2 cores), and read back
    from disk: exactly what `python -m infra.plan` writes and the policy pack reads. Read-only for tests."""
    from infra import plan as planner

    out = tmp_path_factory.mktemp("plan")
    stacks = planner.committed_stacks()
    planner.render(stacks, out)
    return {s: json.loads((out / f"{s}.json").read_text()) for s in stacks}


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A real S3-compatible endpoint: moto's server over HTTP on loopback.

    Yields the endpoint URL. Clients get it through AWS_ENDPOINT_URL_S3 (boto3,
    s3fs) and dummy credentials, exactly as they would talk to a real bucket.
    """
    pytest.importorskip("moto.server", reason="moto[server] is not installed: run `make setup`")
    from tests.emulators import start_moto  # moto is imported only when a test needs S3

    server, env = start_moto()
    try:
        yield env["AWS_ENDPOINT_URL_S3"]
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point boto3/s3fs at the local S3 server for one test."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-south-2")
    return s3_server


def pytest_configure(config: pytest.Config) -> None:
    from tests.leaks import mark_session
    from tests.stray_files import untracked

    mark_session()
    config.stash[_UNTRACKED] = untracked()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A process the suite started and nobody stops (tests/leaks.py), or a file a test left in the repository's tree
    (tests/stray_files.py), is a failure of the run."""
    from tests.leaks import MARKER, leaked
    from tests.stray_files import new_since

    if hasattr(session.config, "workerinput"):  # only the session that owns the processes judges
        return
    for title, head, found in (
        ("leaked processes", "processes started by the tests outlived them (killed now):", leaked(os.environ[MARKER])),
        ("files left in the repository", "tests wrote into the checkout (write under tmp_path):",
         new_since(session.config.stash.get(_UNTRACKED, None))),
    ):  # fmt: skip
        if not found:
            continue
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_sep("=", title, red=True)
            for line in [head, *found]:
                reporter.write_line(line)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
