"""Failures a user meets around the server, not inside it: a server that never answers, a missing or
unreachable input, a stop signal. Each is a one-line error (exit 2) that names the fix, or a clean stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from serving.client import SentimentClient
from serving.errors import RequestTimeoutError, UnavailableError


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "serving", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers: a stuck server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_server_that_does_not_answer_is_a_timeout_error_not_retried(silent_url: str, protocol: str) -> None:
    with SentimentClient(silent_url, protocol=protocol, timeout_s=1, retries=2) as client:  # type: ignore[arg-type]
        start = time.monotonic()
        with pytest.raises(RequestTimeoutError, match=f"no answer from .*\\({protocol}\\) within 1 s"):
            client.classify(["hello"])
        assert client.attempts == 1  # an overloaded server is not sent the request again
        assert time.monotonic() - start < 10
    done = cli("infer", "hello", "--url", silent_url, "--protocol", protocol, "--timeout", "1")
    assert done.returncode == 2 and "raise the timeout (--timeout)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_loadtest_and_signal_inputs_that_cannot_be_read_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "lt.json"
    missing = cli("loadtest", "--texts", str(tmp_path / "absent.txt"), "--out", str(out))
    assert missing.returncode == 2 and "No such file or directory: pass a file" in missing.stderr
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9 ouvert\n".encode("latin-1"))
    undecodable = cli("loadtest", "--texts", str(latin1), "--out", str(out))
    assert undecodable.returncode == 2 and "is not UTF-8" in undecodable.stderr
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    assert "has no non-blank line" in cli("loadtest", "--texts", str(blank), "--out", str(out)).stderr
    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scrape = cli("signal", "--metrics-url", f"http://127.0.0.1:{port}/metrics", "--window", "0.1")
    assert scrape.returncode == 2 and "--metrics-url http://HOST:PORT/metrics" in scrape.stderr
    for done in (missing, undecodable, scrape):
        assert "Traceback" not in done.stderr
    assert not out.exists()


def test_numbers_a_command_cannot_use_exit_2_naming_the_flag() -> None:
    for args, flag in (
        (("infer", "hi", "--timeout", "0"), "--timeout"),  # was a ValueError traceback from the client
        (("loadtest", "--requests", "0", "--out", "x.json"), "--requests"),  # was a report of 0 requests
        (("signal", "--window", "-1"), "--window"),  # was a traceback from time.sleep
    ):
        done = cli(*args)
        assert done.returncode == 2 and f"argument {flag}" in done.stderr, (args, done.stderr)


def test_loadtest_outputs_that_cannot_be_written_exit_2_before_any_request(tmp_path: Path) -> None:
    """Found after the sweep, they cost all its minutes: checked first, with no connection to --url."""
    (tmp_path / "a-file").write_text("")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        server.setblocking(False)
        url = f"127.0.0.1:{server.getsockname()[1]}"
        for out, said in (
            (tmp_path, f"--out {tmp_path} is a folder: pass a file path"),
            (tmp_path / "a-file" / "lt.json", f"{tmp_path / 'a-file'} is a file, not a folder"),
            (Path("/sys/lt.json"), "cannot write in /sys (Permission denied)"),  # even root may not
        ):
            done = subprocess.run(
                [sys.executable, "-m", "serving", "loadtest", "--url", url, "--out", str(out)],
                capture_output=True, text=True, timeout=8,
            )  # fmt: skip
            assert done.returncode == 2 and said in done.stderr, (out, done.stderr)
            assert "Traceback" not in done.stderr
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected: no readiness probe, no load


def test_numbers_and_inputs_checked_before_the_work_exit_2_naming_the_flag(tmp_path: Path) -> None:
    for args, flag in (
        (("serve", str(tmp_path), "--http-port", "-1"), "--http-port"),  # was an OverflowError traceback
        (("serve", str(tmp_path), "--metrics-port", "65536"), "--metrics-port"),
        (("serve", str(tmp_path), "--log-verbose", "-1"), "--log-verbose"),
        (("build", str(tmp_path), str(tmp_path / "m"), "--version", "0"), "--version"),
        (("build", str(tmp_path), str(tmp_path / "m"), "--max-batch-size", "0"), "--max-batch-size"),
        (("build", str(tmp_path), str(tmp_path / "m"), "--instances", "-2"), "--instances"),
        (("build", str(tmp_path), str(tmp_path / "m"), "--queue-delay-us", "-1"), "--queue-delay-us"),
        (("build", str(tmp_path), str(tmp_path / "m"), "--pad-to-multiple-of", "0"), "--pad-to-multiple-of"),
        (("signal", "--window", "inf"), "--window"),  # was an OverflowError from time.sleep
        (("infer", "hi", "--timeout", "nan"), "--timeout"),
    ):
        done = cli(*args)
        assert done.returncode == 2 and f"argument {flag}" in done.stderr, (args, done.stderr)
    assert not (tmp_path / "m").exists()


def test_check_reads_its_bundle_before_waiting_for_the_server(tmp_path: Path, silent_url: str) -> None:
    """Before: a missing --bundle was found after the 60 s wait for the server (or a server start)."""
    done = subprocess.run(
        [sys.executable, "-m", "serving", "check", "--url", silent_url, "--bundle", str(tmp_path / "absent")],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert done.returncode == 2 and "is not a folder: pass the export bundle" in done.stderr, done.stderr


def test_loadtest_against_no_server_is_unavailable_not_a_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    from serving import loadtest

    monkeypatch.setattr(loadtest, "READY_TIMEOUT_S", 0.5, raising=False)  # absent before the fix
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"127.0.0.1:{s.getsockname()[1]}"
    # Before, every request failed to connect and the report held NaN latencies as if measured.
    with pytest.raises(UnavailableError, match="not ready after .*--url/--protocol"):
        loadtest.run(url, ["x"], concurrencies=(1,), requests=3, protocol="http")


def _in_group(process: object, pgid: int) -> bool:
    try:
        return os.getpgid(process.pid) == pgid  # type: ignore[attr-defined]
    except ProcessLookupError:
        return False


@pytest.mark.integration
def test_sigterm_to_check_with_repo_stops_the_server_it_started(served_repo: Path) -> None:
    import psutil

    from tests.serving.conftest import tritonserver_missing

    if reason := tritonserver_missing():
        pytest.skip(reason)
    proc = subprocess.Popen(
        [sys.executable, "-m", "serving", "check", "--repo", str(served_repo)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    servers: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while not servers and time.monotonic() < deadline and proc.poll() is None:
            servers = [c for c in psutil.Process(proc.pid).children() if "tritonserver" in c.name()]
            time.sleep(0.05)
        assert servers, "check --repo never started tritonserver"
        proc.send_signal(signal.SIGTERM)  # what a CI timeout or `kill` sends
        assert proc.wait(timeout=60) == 130
        assert "interrupted" in proc.communicate()[1]
        gone, alive = psutil.wait_procs(servers, timeout=30)
        assert not alive, f"tritonserver {[p.pid for p in alive]} outlived `check --repo`"
        # Its python backend stubs too: stopped while loading, Triton left them running (reparented to init).
        stubs = [p for p in psutil.process_iter(["pid"]) if _in_group(p, servers[0].pid)]
        gone, alive = psutil.wait_procs(stubs, timeout=10)
        assert not alive, (
            f"{[p.cmdline()[:1] for p in alive]} of tritonserver's group outlived `check --repo`"
        )
    finally:
        if proc.poll() is None:
            proc.kill()
        for child in servers:
            if child.is_running():
                child.kill()
