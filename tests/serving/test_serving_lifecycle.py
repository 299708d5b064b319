"""tritonserver dies with the process that started it, however that process ends.

SIGTERM and Ctrl-C were handled (stop() takes the server's process group), but a starter killed with SIGKILL
(the OOM killer, `kill -9`, `timeout -s KILL`, a CI runner's cleanup) left tritonserver and its python backend
stubs running, reparented to init, holding their ports and models. Each test learns the server's process
group before killing the starter and kills that group itself at the end, so a failure leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from localservers import free_port
from tests.serving.conftest import tritonserver_missing

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 30.0  # the watchdog's grace (15 s) for a server that ignores SIGINT, plus slack


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    out: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return out


def _wait_for_line(lines: queue.Queue[str], prefix: str, timeout_s: float = 120.0) -> str:
    deadline, seen = time.monotonic() + timeout_s, []
    while time.monotonic() < deadline:
        with contextlib.suppress(queue.Empty):
            line = lines.get(timeout=0.5)
            seen.append(line)
            if line.startswith(prefix):
                return line
    raise AssertionError(
        f"no line starting with {prefix!r} within {timeout_s} s; got: {''.join(seen)[-2000:]}"
    )


def _group(pgid: int) -> list:  # noqa: ANN401 - psutil.Process
    """Live (not zombie) processes of process group `pgid`."""
    import psutil

    found = []
    for proc in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                found.append(proc)
    return found


def _children_named(pid: int, word: str) -> list:  # noqa: ANN401 - psutil.Process
    """Children of `pid` whose executable or script (not any argument: the server's folder is named
    tritonserver-*) is named `word`."""
    import psutil

    found = []
    for child in psutil.Process(pid).children():
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.name() == word or any(Path(arg).name == word for arg in child.cmdline()[1:3]):
                found.append(child)
    return found


def _shm_regions(group: list) -> list[Path]:  # noqa: ANN401 - psutil.Process
    """The /dev/shm files of the group's python backend stubs (the stub's second argument names its region)."""
    import psutil

    regions = []
    for proc in group:
        with contextlib.suppress(psutil.NoSuchProcess):
            args = proc.cmdline() if proc.name() == "triton_python_backend_stub" else []
            if len(args) > 2:  # empty while it execs
                regions.append(Path("/dev/shm") / args[2])
    return regions


def _expect_removed(regions: list[Path], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (left := [r for r in regions if r.exists()]) and time.monotonic() < deadline:
        time.sleep(0.2)
    for region in left:  # cleanup of a failure, then fail
        region.unlink(missing_ok=True)
    assert not left, f"shared memory of stopped stubs left in /dev/shm: {[r.name for r in left]}"


def _kill_with_its_servers(starter: subprocess.Popen[str]) -> None:
    """Cleanup when a test fails before it learned the group: the starter, and the servers it started."""
    import psutil

    servers = []
    with contextlib.suppress(psutil.NoSuchProcess):
        servers = _children_named(starter.pid, "tritonserver")
    starter.kill()
    starter.wait()
    for server in servers:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(server.pid, signal.SIGKILL)


def _kill_starter_and_expect_the_group_gone(
    starter: subprocess.Popen[str], server_pid: int, port: int
) -> None:
    import psutil

    pgid = os.getpgid(server_pid)  # start_new_session: the server leads its own group
    watchdogs = _children_named(starter.pid, "watchdog.py")
    try:
        group = _group(pgid)
        names = [p.name() for p in group]
        assert any("triton_python_backend_stub" in n for n in names), f"no python backend stub yet: {names}"
        regions = _shm_regions(group)
        starter.send_signal(signal.SIGKILL)
        starter.wait(timeout=10)
        deadline = time.monotonic() + GONE_WITHIN_S
        while (left := _group(pgid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, (
            f"{[(p.pid, p.name()) for p in left]} of tritonserver's group outlived its starter's SIGKILL "
            f"by {GONE_WITHIN_S:.0f} s"
        )
        gone, alive = psutil.wait_procs(watchdogs, timeout=10)
        assert not alive, f"the watchdog {[p.pid for p in alive]} outlived the server it stopped"
        with socket.socket() as s:  # nobody listens on the server's port any more
            assert s.connect_ex(("127.0.0.1", port)) != 0
        _expect_removed(regions)
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        for proc in watchdogs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()


def test_sigkill_of_the_serve_cli_takes_tritonserver_and_its_stubs_with_it(served_repo: Path) -> None:
    if reason := tritonserver_missing():
        pytest.skip(reason)
    http_port = free_port()
    cli = subprocess.Popen(
        [sys.executable, "-m", "serving", "serve", str(served_repo), "--http-port", str(http_port),
         "--grpc-port", str(free_port()), "--metrics-port", str(free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        _wait_for_line(_lines(cli), "Ctrl-C")
        servers = _children_named(cli.pid, "tritonserver")
        assert len(servers) == 1, servers
    except BaseException:
        _kill_with_its_servers(cli)
        raise
    _kill_starter_and_expect_the_group_gone(cli, servers[0].pid, http_port)


STARTED_FROM_A_THREAD = """
import sys, threading, time
from serving.server import TritonServer

box = {}
thread = threading.Thread(target=lambda: box.setdefault("s", TritonServer(sys.argv[1], http_port=int(sys.argv[2]),
                          grpc_port=0, metrics_port=0).start()))
thread.start()
thread.join()
time.sleep(2)  # a death signal tied to the starting thread (PR_SET_PDEATHSIG) would have fired by now
print("SERVER", box["s"].process.pid, box["s"].is_ready(), flush=True)
time.sleep(600)
"""


def test_a_server_started_from_a_thread_outlives_the_thread_but_not_the_process(served_repo: Path) -> None:
    """The demo and benchmarks start servers from whatever thread runs them: the server must stay up when
    that thread ends, and still go when the process is killed."""
    if reason := tritonserver_missing():
        pytest.skip(reason)
    http_port = free_port()
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTED_FROM_A_THREAD, str(served_repo), str(http_port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        _, pid, ready = _wait_for_line(_lines(starter), "SERVER").split()
        assert ready == "True", "the server died with the thread that started it"
    except BaseException:
        _kill_with_its_servers(starter)
        raise
    _kill_starter_and_expect_the_group_gone(starter, int(pid), http_port)


STARTED_THEN_FORKED = """
import os, sys, time
from serving.server import TritonServer

server = TritonServer(sys.argv[1], http_port=int(sys.argv[2]), grpc_port=0, metrics_port=0).start()
child = os.fork()
if child == 0:  # e.g. a multiprocessing worker: holds a copy of every descriptor the starter had
    time.sleep(600)
    os._exit(0)
print("SERVER", server.process.pid, child, flush=True)
time.sleep(600)
"""


def test_a_forked_child_of_the_starter_does_not_keep_the_server_alive(served_repo: Path) -> None:
    if reason := tritonserver_missing():
        pytest.skip(reason)
    http_port = free_port()
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTED_THEN_FORKED, str(served_repo), str(http_port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        _, pid, child = _wait_for_line(_lines(starter), "SERVER").split()
    except BaseException:
        _kill_with_its_servers(starter)
        raise
    try:
        _kill_starter_and_expect_the_group_gone(starter, int(pid), http_port)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(child), signal.SIGKILL)


def test_stopping_a_server_while_it_loads_leaves_no_shared_memory(served_repo: Path) -> None:
    """stop() SIGKILLs the stubs Triton leaves when stopped while loading; their /dev/shm regions (1 MiB and up
    each) stayed until reboot: in a container's 64 MiB /dev/shm a few interrupted starts stop every later one."""
    import psutil

    if reason := tritonserver_missing():
        pytest.skip(reason)
    cli = subprocess.Popen(
        [sys.executable, "-m", "serving", "check", "--repo", str(served_repo)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    regions: list[Path] = []
    pgid = None
    try:
        deadline = time.monotonic() + 60
        while not regions and time.monotonic() < deadline and cli.poll() is None:
            with contextlib.suppress(psutil.NoSuchProcess):
                servers = _children_named(cli.pid, "tritonserver")
                if servers:
                    pgid = servers[0].pid
                    regions = _shm_regions(_group(pgid))
            time.sleep(0.02)
        assert regions, "check --repo never started a python backend stub"
        cli.send_signal(signal.SIGTERM)  # while the other models still load
        assert cli.wait(timeout=60) == 130
        _expect_removed(regions)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
