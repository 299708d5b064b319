"""`python -m pipeline run` as users start it (cron, CI, a terminal): a real process in its own session, with the
helpers the run tests share (inputs the drift step reads, waiting on a step, the processes a run left behind)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.monitoring.synthetic_records import record, write

ROOT = Path(__file__).resolve().parents[2]


def start(*args: str, cwd: Path = ROOT) -> subprocess.Popen[str]:
    """The runner as its session's leader: its pid is the session id every process it starts carries."""
    env = {**os.environ, "TRAINING_MLFLOW": "0", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline", "run", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip


RUNNER = textwrap.dedent(
    """
    import signal, sys
    from pipeline import cli, dag, runner
    signal.signal(signal.SIGTERM, cli._interrupt)  # as `python -m pipeline run` does before runner.run
    try:
        from pipeline import supervise
        supervise.STOP_GRACE_S = 2.0
    except ImportError:
        pass
    params = dag.Params(store=sys.argv[1], work=sys.argv[2])
    try:
        # drift-check never runs (the run stops at data-check): its inputs need not exist
        stubborn = [sys.executable, "-c", sys.argv[3]]
        runner.run(params, commands={"data-check": stubborn, "drift-check": stubborn})
    except KeyboardInterrupt:
        sys.exit(130)
    """
)
"""runner.run with two steps replaced by `sys.argv[3]` (python source), as `python -m pipeline run` sets it up."""

STUB_RUNNER = textwrap.dedent(
    """
    import json, os, signal, sys
    from pipeline import cli, dag, runner, supervise
    signal.signal(signal.SIGTERM, cli._interrupt)  # as `python -m pipeline run` does before runner.run
    supervise.STOP_GRACE_S = 2.0
    spec = json.loads(sys.argv[1])
    def echo(line):
        print(line, flush=True)
        if spec["signal_after"] and spec["signal_after"] in line:  # a real SIGTERM, at a known point of the run
            os.kill(os.getpid(), signal.SIGTERM)
    try:
        runner.run(dag.Params(**spec["params"]), commands=spec["commands"], echo=echo)
    except KeyboardInterrupt:
        sys.exit(130)
    """
)


def start_runner(
    params: dict[str, str], commands: dict[str, list[str]], *, signal_after: str = "", cwd: Path = ROOT
) -> subprocess.Popen[str]:
    """runner.run in its own session, `commands` replacing those steps' argv (the others run for real, from `cwd`);
    with `signal_after`, the runner sends itself SIGTERM once it has printed a line holding that text."""
    spec = {"params": params, "commands": commands, "signal_after": signal_after}
    env = {**os.environ, "TRAINING_MLFLOW": "0", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", STUB_RUNNER, json.dumps(spec)], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip


def stub(*lines: str) -> list[str]:
    """A step that runs these lines of Python (`pathlib`, `sys` and `time` imported)."""
    return [sys.executable, "-c", "\n".join(("import pathlib, sys, time", *lines))]


def writes(path: Path, text: str = "true") -> list[str]:
    """A step that writes `text` to `path` (a condition step's flag file) and exits 0."""
    return stub(
        f"p = pathlib.Path({str(path)!r}); p.parent.mkdir(parents=True, exist_ok=True)",
        f"p.write_text({text!r})",
    )


def records(folder: Path) -> dict[str, str]:
    """A drift reference and an inference window (synthetic records, monitoring's documented fields): the real
    drift step takes seconds on them."""
    rng = random.Random(0)
    (folder / "current").mkdir(parents=True)
    write(folder / "reference.jsonl", [record(i, rng) for i in range(300)])
    write(folder / "current" / "part.jsonl", [record(i, rng) for i in range(300)])
    return {"reference": str(folder / "reference.jsonl"), "current": str(folder / "current")}


def blocking_reference(folder: Path) -> str:
    """A FIFO as the drift reference: drift-check blocks opening it, a step still running when the test acts."""
    fifo = folder / "reference.jsonl"
    os.mkfifo(fifo)
    return str(fifo)


def wait_for(proc: subprocess.Popen[str], path: Path, text: str = "", timeout_s: float = 120) -> None:
    """Until `path` exists (and holds `text`), while the run is still going."""
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and text in path.read_text(errors="replace")):
        assert proc.poll() is None, (
            f"the run ended ({proc.returncode}) before {path}: {proc.communicate()[0]}"
        )
        assert time.monotonic() < deadline, f"no {path} with {text!r} after {timeout_s} s"
        time.sleep(0.1)


def session(sid: int) -> list[str]:
    """`ps` lines (pid, pgid, state, command) of the live processes left in a session (the run's, since it leads
    its own); a zombie whose parent died with it is gone already, waiting for init to reap it."""
    done = subprocess.run(
        ["ps", "-o", "pid=,pgid=,stat=,args=", "-s", str(sid)], capture_output=True, text=True
    )
    return [line for line in done.stdout.splitlines() if line.strip() and not line.split()[2].startswith("Z")]


def kill_session(proc: subprocess.Popen[str]) -> None:
    """Cleanup: whatever is left of this run's session (the runner's group and each step's own group)."""
    for line in session(proc.pid):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(line.split()[1]), signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.communicate()


def assert_interrupted(
    proc: subprocess.Popen[str], out: str, left: list[str], work: Path, step: str, signal_name: str
) -> dict[str, Any]:
    """A run stopped by `signal_name` while `step` ran: exit 130, nothing of it left running (`left`: its session
    once it had exited), and a record saying so: that step failed with 130, interrupted, every later one skipped,
    the run failed there. Returns the record (WORK's copy)."""
    assert proc.returncode == 130, out
    assert left == [], f"still running after the runner exited: {left}"
    record = json.loads((work / "pipeline-run.json").read_text())
    names = [s["step"] for s in record["steps"]]
    steps = {s["step"]: s for s in record["steps"]}
    assert steps[step]["status"] == "failed" and steps[step]["exit_code"] == 130, steps[step]
    assert steps[step]["why"] == f"interrupted ({signal_name})", steps[step]
    assert record["interrupted"] == signal_name, record
    assert {steps[s]["status"] for s in names[names.index(step) + 1 :]} <= {"skipped"}, record["steps"]
    assert record["outcome"] == f"failed at {step}", record["outcome"]
    return record
