"""The suite's leak check (tests/leaks.py, run at the end of every session by tests/conftest.py) sees a process
that escaped its starter and leaves the starter's own children alone."""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import psutil

from tests.leaks import MARKER, leaked, orphans


def test_an_escaped_process_is_reported_and_killed_a_running_child_is_not() -> None:
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker}
    child = subprocess.Popen(["sleep", "60"], env=env)  # ours, still running: pytest's descendant
    # The shape of the Triton stubs: started by a process that exits, reparented to init.
    subprocess.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 &"], env=env, check=True)
    try:
        deadline = time.monotonic() + 10
        while not orphans(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        (escaped,) = orphans(marker)
        assert escaped.cmdline() == ["sleep", "60"] and escaped.pid != child.pid
        found = leaked(marker, grace_s=0)
        assert [line.split(":")[0] for line in found] == [f"pid {escaped.pid}"]
        assert not escaped.is_running() or escaped.status() == psutil.STATUS_ZOMBIE
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_this_session_is_marked() -> None:
    assert os.environ.get(MARKER)
