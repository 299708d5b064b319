"""`python -m pipeline run` refuses bad parameters before any step runs (exit 2), `--dry-run` included.

Each step reads only its own parameters, and `images`/`promote` come last: an unknown `--env` or
`--local yes` used to be found there, exit 2 of the step, after the data check, the training and the
export had run (hours on the GPU preset), and `--dry-run` printed the plan as if it would work.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline import dag, runner

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "run", *args],
        cwd=ROOT, env={**os.environ, "TRAINING_MLFLOW": "0"}, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


@pytest.mark.integration
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "prdo"], "--env prdo: unknown environment 'prdo': configured are dev, staging, prod"),
        (["--local", "yes"], "--local must be true or false, got 'yes'"),
        (["--max-model-age-days", "a month"], "--max-model-age-days must be a number of days >= 0"),
        (["--mode", "tune", "--trials", "0"], "--trials must be a whole number > 0, got '0'"),
        (["--local", "false", "--serving-image", "reg.example/serving:latest"], "is not pinned by digest"),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_bad_parameters_stop_the_run_before_any_step(
    tmp_path: Path, args: list[str], message: str, dry_run: bool
) -> None:
    work = tmp_path / "work"
    # The drift inputs do not exist: the old code failed fast at drift-check (exit 1) instead of training.
    done = run_cli(
        "--preset", "smoke", "--store", str(tmp_path / "store"), "--work", str(work),
        "--reference", str(tmp_path / "none.json"), "--current", str(tmp_path / "none"),
        *args, *(["--dry-run"] if dry_run else []),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert "RUN " not in done.stdout and not work.exists() and not (tmp_path / "store").exists()


def test_the_runner_refuses_them_too(tmp_path: Path) -> None:
    params = dag.Params(env="prdo", local="yes", store=str(tmp_path / "store"), work=str(tmp_path / "work"))
    with pytest.raises(ValueError, match="--local must be true or false.*--env prdo: unknown environment"):
        runner.run(params, echo=lambda line: None)
    assert not (tmp_path / "work").exists()
    assert runner.problems(dag.Params()) == []


@pytest.mark.integration
def test_a_cancelled_run_still_writes_its_record(tmp_path: Path) -> None:
    """SIGTERM (a cancelled CI job) or Ctrl-C during a step: was no record at all, in the store or WORK."""
    fifo = tmp_path / "reference.jsonl"
    os.mkfifo(fifo)  # drift-check blocks reading it: a step that is still running when the run is cancelled
    (tmp_path / "current").mkdir()  # a missing window is refused before any step runs
    work, store = tmp_path / "work", tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "run", "--preset", "smoke", "--store", str(store), "--work", str(work),
         "--reference", str(fifo), "--current", str(tmp_path / "current")],
        cwd=ROOT, env={**os.environ, "TRAINING_MLFLOW": "0"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (work / "logs" / "drift-check.log").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.2)
        time.sleep(1)
        proc.terminate()  # the runner only, as a CI runner cancelling the job does first
        out, _ = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the step too, if the runner left it (the old one did)
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 130, out
    record = json.loads((work / "pipeline-run.json").read_text())
    status = {s["step"]: s["status"] for s in record["steps"]}
    assert status["data-check"] == "succeeded" and status["drift-check"] == "failed", out
    assert {status[s] for s in ("decide-retrain", "train", "evaluate", "export", "images", "promote")} == {
        "skipped"
    }
    assert record["outcome"] == "failed at drift-check"
    (stored,) = (store / "sentiment" / "pipeline-runs").glob("*.json")
    assert json.loads(stored.read_text()) == record
