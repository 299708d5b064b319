"""A step that exits leaving processes behind (a background `sleep`, a server it started): the run goes on.

The runner read the step's output to its end before it waited for the step: a process the step left holding the
pipe hung the run until that process ended (300 s here, for good with a server), and one it left without the pipe
ran on unsignalled, holding WORK's lock. Now the step ends when its process exits, and what it left in its process
group is stopped as an interrupted step is: SIGTERM, SIGKILL after supervise.STOP_GRACE_S.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.pipeline.run_cli import ROOT, kill_session, session

pytestmark = pytest.mark.integration

RUNNER = textwrap.dedent(
    """
    import sys
    from pipeline import dag, runner, supervise
    supervise.STOP_GRACE_S = 2.0
    params = dag.Params(store=sys.argv[1], work=sys.argv[2])
    leaves = [sys.executable, "-c", sys.argv[3]]
    fails = [sys.executable, "-c", "print('drift-check ran'); raise SystemExit(3)"]  # a short run from here
    runner.run(params, commands={"data-check": leaves, "drift-check": fails})
    """
)

# Each step exits at once, 0, leaving a `sleep 300` in its process group.
LEFT = {
    "holding its output": "subprocess.Popen(['sleep', '300'])",
    "not holding its output": "subprocess.Popen(['sleep', '300'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)",
    "holding its output, ignoring SIGTERM": (
        "subprocess.Popen(['sleep', '300'], preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))"
    ),
}


@pytest.mark.parametrize("left", list(LEFT))
def test_a_step_that_exits_ends_and_what_it_left_is_stopped(tmp_path: Path, left: str) -> None:
    work, store = tmp_path / "work", tmp_path / "store"
    step = f"import signal, subprocess; {LEFT[left]}; print('step done', flush=True)"
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(store), str(work), step], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=30)  # the runner's own exit: it hung for the sleep's 300 s
        seconds = time.monotonic() - started
        left_running = session(proc.pid)
    except subprocess.TimeoutExpired:
        left_running = session(proc.pid)
        kill_session(proc)
        pytest.fail(f"the run still waits on data-check after 30 s: {left_running}")
    finally:
        kill_session(proc)
    assert proc.returncode == 0, out
    assert left_running == [], f"still running after the run: {left_running}"
    assert seconds < 20, f"{seconds:.0f} s: {out}"
    record = json.loads((work / "pipeline-run.json").read_text())
    steps = {s["step"]: s for s in record["steps"]}
    assert steps["data-check"]["status"] == "succeeded" and steps["data-check"]["exit_code"] == 0, out
    assert steps["drift-check"]["exit_code"] == 3 and record["outcome"] == "failed at drift-check"
    log = (work / "logs" / "data-check.log").read_text()
    assert log.startswith("step done\n") and "pipeline: the step exited (0) but left processes" in log, log
    assert "     | drift-check ran" in out, out


def test_a_step_output_byte_that_is_not_utf8_is_replaced_not_a_traceback(tmp_path: Path) -> None:
    """A Latin-1 byte in a step's output (a tool's message, a dataset row it printed) raised UnicodeDecodeError in
    the runner: a traceback, no record, the step left unwaited."""
    work, store = tmp_path / "work", tmp_path / "store"
    step = "import sys; sys.stdout.buffer.write(b'caf\\xe9\\r50%\\r100%\\n'); print('after')"
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(store), str(work), step], cwd=ROOT, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (work / "logs" / "data-check.log").read_text() == "caf\ufffd\n50%\n100%\nafter\n"
    assert "     | caf\ufffd\n     | 50%\n     | 100%\n     | after\n" in done.stdout, done.stdout
    record = json.loads((work / "pipeline-run.json").read_text())
    assert record["steps"][0]["status"] == "succeeded" and record["outcome"] == "failed at drift-check"
