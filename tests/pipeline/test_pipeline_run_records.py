"""`python -m pipeline run` as a user starts it, its steps replaced by stubs (what is tested is the run's exit code
and its record, not the steps' work): a run with a failed step exits 1 whatever its outcome reads, and a WORK whose
record is the only copy of it (the store refused it) is not written over by the next run there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.run_cli import ROOT, stub, writes

pytestmark = pytest.mark.integration

CLI = (
    "import functools, json, sys\n"
    "from pipeline import cli, runner\n"
    "runner.run = functools.partial(runner.run, commands=json.loads(sys.argv[1]))\n"
    "sys.exit(cli.main(sys.argv[2:]))\n"
)
"""`python -m pipeline run ARGS`, with these steps' argv replaced (runner.run's `commands`)."""


def pipeline_run(commands: dict[str, list[str]], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRAINING_MLFLOW": "0", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", CLI, json.dumps(commands), "run", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def inputs(tmp_path: Path) -> list[str]:
    """The drift inputs `run` checks exist (the stubbed drift-check does not read them)."""
    (tmp_path / "current").mkdir(exist_ok=True)
    (tmp_path / "reference.jsonl").write_text("")
    return ["--reference", str(tmp_path / "reference.jsonl"), "--current", str(tmp_path / "current")]


def to_promote(work: Path) -> dict[str, list[str]]:
    """Every step up to `promote` succeeds, each condition true."""
    ok = stub("pass")
    decisions = work / "decisions"
    return {
        "data-check": ok, "drift-check": ok, "decide-retrain": writes(decisions / "decide-retrain.flag"),
        "train": ok, "evaluate": writes(decisions / "evaluate.flag"), "export": ok,
        "images": writes(decisions / "images.flag"),
    }  # fmt: skip


def test_a_promotion_whose_drift_reference_was_not_written_exits_1(tmp_path: Path) -> None:
    """The `promote` step promoted, then failed to write the drift reference (exit 2): the outcome says promoted and
    names the command to run, but the run exited 0, so cron and CI saw a success, nobody ran the command, and the
    next scheduled drift-check refused the new model's window. README: exit 0 unless a step failed."""
    work = tmp_path / "work"
    command = "python -m promotion reference --env dev --drift-reference /refs/ --candidate x"
    decision = {"promoted": True, "decision": "promote", "exit_code": 2, "drift_reference_written": False,
                "drift_reference_command": command}  # fmt: skip
    promote = stub(
        f"p = pathlib.Path({str(work / 'decisions' / 'promote.json')!r})",
        f"p.write_text({json.dumps(decision)!r})",
        "sys.exit(2)",
    )
    done = pipeline_run({**to_promote(work), "promote": promote}, "--store", str(tmp_path / "store"),
                        "--work", str(work), *inputs(tmp_path))  # fmt: skip
    record = json.loads((work / "pipeline-run.json").read_text())
    assert record["outcome"] == f"promoted, but its drift reference was not written: {command}", done.stdout
    assert {s["step"]: s["status"] for s in record["steps"]}["promote"] == "failed"
    assert done.returncode == 1, done.stdout + done.stderr


def test_a_record_the_store_refused_is_not_written_over_by_the_next_run(tmp_path: Path) -> None:
    """The store refused run A's record: WORK/pipeline-run.json is its only copy, and the run said to copy it to
    the store. Run again in that WORK once the store was fixed, and run B's record replaced it: A's was lost."""
    work, ok = tmp_path / "work", stub("pass")
    (tmp_path / "a-file").write_text("not a folder\n")
    calm = {**to_promote(work), "decide-retrain": writes(work / "decisions" / "decide-retrain.flag", "false")}
    first = pipeline_run(calm, "--store", str(tmp_path / "a-file" / "store"), "--work", str(work),
                         *inputs(tmp_path))  # fmt: skip
    assert first.returncode == 1, first.stdout + first.stderr
    kept = (work / "pipeline-run.json").read_bytes()
    lost = json.loads(kept)
    assert "record_error" in lost, lost

    second = pipeline_run({**calm, "train": ok}, "--store", str(tmp_path / "store"), "--work", str(work),
                          *inputs(tmp_path))  # fmt: skip
    assert second.returncode == 2, second.stdout + second.stderr
    assert (work / "pipeline-run.json").read_bytes() == kept
    err = second.stderr
    assert f"holds the record of run {lost['run_id']}" in err and lost["record_uri"] in err, err
    assert "\nRUN " not in "\n" + second.stdout and not (tmp_path / "store").exists()
