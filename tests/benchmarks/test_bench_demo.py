"""`python -m benchmarks.demo` interrupted: the demo it runs must get to stop what it started.

The benchmark's own code runs for real; the demo it starts is a stand-in (a `demo` package in the working
folder, found first by `python -m demo`) that behaves like the real one where it matters: it starts a server
in a session of its own, and on SIGINT/SIGTERM/SIGHUP takes a moment to stop it, then exits 130.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE_DEMO = """
import json, signal, subprocess, sys, time
from pathlib import Path

reports = Path(sys.argv[sys.argv.index("--reports") + 1])
server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)

def stop(signum, frame):
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    time.sleep(1.5)  # the real demo's stop: Triton drains, training checkpoints
    server.terminate()
    server.wait()
    (reports / "demo").mkdir(parents=True, exist_ok=True)
    (reports / "demo" / "summary.json").write_text(json.dumps({"failed_stage": {"why": "interrupted"}}))
    sys.exit(130)

for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, stop)
Path("server.pid").write_text(str(server.pid))
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _bench(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "__init__.py").write_text("")
    (tmp_path / "demo" / "__main__.py").write_text(FAKE_DEMO)
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.demo"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,  # its own process group, as a terminal's foreground job has
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    pid_file = tmp_path / "server.pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not pid_file.exists():
        proc.kill()
        pytest.fail(f"the stand-in demo did not start:\n{proc.communicate()[0][-2000:]}")
    return proc, int(pid_file.read_text())


@pytest.mark.parametrize(
    "how",
    [
        "ctrl-c",  # the terminal sends SIGINT to the whole foreground process group
        "sigterm",  # make, cancelled, sends SIGTERM to the benchmark only
    ],
)
def test_an_interrupted_benchmark_lets_the_demo_stop_its_servers(tmp_path: Path, how: str) -> None:
    proc, server = _bench(tmp_path)
    try:
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        deadline = time.monotonic() + 5
        while _alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(server), f"the demo's server outlived the interrupted benchmark:\n{out[-2000:]}"
    finally:
        with contextlib.suppress(ProcessLookupError):  # the group outlives the benchmark if the demo does
            os.killpg(proc.pid, signal.SIGKILL)
        if _alive(server):
            os.kill(server, signal.SIGKILL)
    assert proc.returncode == 130, out[-2000:]
    # An interrupted run is no measurement: the last complete one is kept.
    assert not (tmp_path / "reports" / "bench" / "demo.json").exists()
