"""Servers this repository starts on one machine (tests, benchmarks, `make demo`): a picked port, a readiness
check that cannot be fooled by a stranger on that port, and a stop by the process group it started.

A port picked free (bind port 0, release) is free only until someone binds it: another test's server, an
outgoing connection's ephemeral port. Each server reports a lost port with "already in use" in its output
(Go's "bind: address already in use", Python's "[Errno 98] Address already in use", Node's "EADDRINUSE: address
already in use", uvicorn's), and then exits (the Pushgateway with 0) or, like gcp-storage-emulator, keeps running
without a listener: either way it is stopped and started again on a fresh pick, START_ATTEMPTS times in all.

Never imported by the images: containers/training/Dockerfile does not copy this package.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

START_ATTEMPTS = 3


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` or a descendant listens on `port`: a stranger there answers probes just as well."""
    import psutil  # the delivery group's (in the lock): only the machines that start servers need it

    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return False
    for proc in family:
        with contextlib.suppress(psutil.Error):
            if any(
                c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in proc.net_connections("tcp")
            ):
                return True
    return False


def http_ok(path: str) -> Callable[[int], bool]:
    """A readiness probe: GET http://127.0.0.1:PORT`path` answers 2xx."""

    def ready(port: int) -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2).close()  # noqa: S310 (loopback)
        except OSError:
            return False
        return True

    return ready


def stop_group(proc: subprocess.Popen, grace_s: float = 15) -> None:
    """SIGTERM the process group `proc` leads, SIGKILL what is left after `grace_s`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def start_on_free_port(
    command: Callable[[int], list[str]], log: Path, what: str, ready: Callable[[int], bool] | None = None,
    *, timeout_s: float = 60, grace_s: float = 15, error: type[Exception] = RuntimeError,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen, int]:  # fmt: skip
    """Run `command(port)` on a picked port in its own session, output appended to `log`; return the process and
    the port once the process itself listens there (and `ready(port)`). Stop it with `stop_group`. `env`: variables
    set over this process's environment for the server.

    Failures raise `error` (the caller's own error class) with the end of the log.
    """
    for _ in range(START_ATTEMPTS):
        port = free_port()
        seen = log.stat().st_size if log.exists() else 0
        with log.open("ab") as out:
            proc = subprocess.Popen(
                command(port), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, **env} if env else None,
            )  # fmt: skip
        try:
            if _wait_ready(proc, port, ready, what, log, seen, timeout_s, error):
                return proc, port
        except BaseException:
            stop_group(proc, grace_s)
            raise
        stop_group(proc, grace_s)
    raise error(f"{what} lost each of {START_ATTEMPTS} free ports picked to another process:\n{_tail(log)}")


def _wait_ready(
    proc: subprocess.Popen, port: int, ready: Callable[[int], bool] | None, what: str, log: Path, seen: int,
    timeout_s: float, error: type[Exception],
) -> bool:  # fmt: skip
    """True once `proc` serves on `port`, False when it lost the port; raises when it failed otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        # Checked before the exit: the server that lost its port may exit 0 (the Pushgateway) or not at all.
        with log.open("rb") as f:
            f.seek(seen)
            if b"already in use" in f.read().lower():
                return False
        if proc.poll() is not None:
            raise error(f"{what} exited {proc.returncode} before listening on {port}:\n{_tail(log)}")
        if listens(proc.pid, port) and (ready is None or ready(port)):
            return True
        time.sleep(0.1)
    raise error(f"{what} did not serve on {port} within {timeout_s:.0f} s:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]
