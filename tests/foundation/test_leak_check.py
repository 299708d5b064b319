"""The suite's leak check (tests/leaks.py, run at the end of every session by tests/conftest.py) sees a process
that escaped its starter and leaves the starter's own children alone; its stray-file check (tests/stray_files.py)
names a file a test left in the checkout."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import psutil

from tests.leaks import MARKER, leaked, orphans
from tests.stray_files import new_since, untracked


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


def test_a_file_a_test_leaves_in_the_checkout_is_named_an_ignored_one_is_not(tmp_path: Path) -> None:
    """tests/stray_files.py, on a checkout of its own: what the session's end compares."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("runs/\n")
    (tmp_path / "kept.txt").write_text("there before the session\n")
    before = untracked(tmp_path)
    assert before == {".gitignore", "kept.txt"}
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "out.json").write_text("{}")  # a command's ignored output
    (tmp_path / "unused-by-the-fake").mkdir()
    (tmp_path / "unused-by-the-fake" / "reference.jsonl").write_text("{}\n")
    assert new_since(before, tmp_path) == ["unused-by-the-fake/reference.jsonl"]
    assert new_since(None, tmp_path) == [] and untracked(tmp_path / "no-such-folder") is None
