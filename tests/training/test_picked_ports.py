"""tests/training/picked_ports.py: a held port keeps strangers out; only a lost port is retried, on a fresh pick."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import localservers
from tests.conftest import pick_first
from tests.training.picked_ports import held_port, run_on_fresh_port, start_store_host

# A store host in miniature: listens on the port it is given, as torchrun's node 0 does.
HOST = "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(60)"


def test_a_held_port_refuses_connections_and_every_other_bind() -> None:
    with held_port() as port:
        with socket.socket() as client:
            assert client.connect_ex(("127.0.0.1", port)) == errno.ECONNREFUSED
        for reuse in (False, True):  # servers set SO_REUSEADDR (werkzeug, Go, c10d's TCPStore)
            with socket.socket() as other:
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, int(reuse))
                with pytest.raises(OSError) as err:
                    other.bind(("", port))
                assert err.value.errno == errno.EADDRINUSE


def _host(log: Path, code: str = HOST):  # noqa: ANN202
    def start(port: int) -> subprocess.Popen:
        with log.open("ab") as out:
            return subprocess.Popen(
                [sys.executable, "-c", code, str(port)], stdout=out, stderr=subprocess.STDOUT
            )

    return start


@pytest.mark.parametrize("holder", ["taken", "stranger"])
def test_a_store_port_held_by_another_listener_is_picked_again(
    holder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    taken = request.getfixturevalue(holder)
    if holder == "stranger":
        pick_first(monkeypatch, taken)
    proc, port = start_store_host(_host(tmp_path / "log"), tmp_path / "log", timeout_s=30)
    try:
        assert port != taken and localservers.listens(proc.pid, port)
    finally:
        proc.kill()
        proc.wait()


def test_a_store_host_that_fails_on_its_own_is_reported_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks: list[int] = []
    real = localservers.free_port

    def counted() -> int:
        picks.append(real())
        return picks[-1]

    monkeypatch.setattr(localservers, "free_port", counted)
    broken = "import sys; print('ModuleNotFoundError: no module named torch'); sys.exit(1)"
    with pytest.raises(AssertionError, match="(?s)exited 1 before listening.*no module named torch"):
        start_store_host(_host(tmp_path / "log", broken), tmp_path / "log", timeout_s=30)
    assert len(picks) == 1


def _done(code: int, stderr: str) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess([], code, "", stderr)


def test_a_run_is_repeated_only_when_it_lost_its_port(monkeypatch: pytest.MonkeyPatch) -> None:
    lost = "The server socket has failed to listen ... code: -98, name: EADDRINUSE, message: address already in use"
    runs = iter(
        [_done(75, lost), _done(75, "Timed out after 4 seconds waiting for clients. 1/2 clients joined.")]
    )
    pick_first(monkeypatch, 1111)
    done, port = run_on_fresh_port(lambda p: next(runs))
    assert port != 1111 and "1/2 clients joined" in done.stderr

    other = iter([_done(1, "ValueError: bad preset"), _done(0, "")])
    done, _ = run_on_fresh_port(lambda p: next(other))
    assert done.returncode == 1  # a real failure comes back as it is
