"""What `python -m pipeline run` refuses before any step runs (exit 2, nothing touched): parameters found wrong only
at `promote`, after the training, and a WORK that belongs to another run.

A WORK is one run's: its steps write their flags there and train into WORK/candidate. Two runs in one WORK (the
same --work, or two runs started in the same second, whose default WORK was runs/pipeline/<second>) trained into
one candidate; a run in the WORK of a finished one did not train at all (the trainer found the finished
checkpoint and re-scored it) and re-exported into the folder the earlier promotion record names as its source.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.pipeline.run_cli import blocking_reference, kill_session, records, start, wait_for

pytestmark = pytest.mark.integration


def refused(tmp_path: Path, *args: str, dry_run: bool = False) -> str:
    """Runs the CLI to its end; asserts exit 2 before any step; returns what it printed."""
    proc = start(
        "--preset", "smoke", "--store", str(tmp_path / "store"), *args, *(["--dry-run"] if dry_run else [])
    )
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        kill_session(proc)
    assert proc.returncode == 2, out
    assert "\nRUN " not in "\n" + out and not (tmp_path / "store").exists(), out
    return out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # promotion refuses --local-run for staging and prod, but only at the last step
        (["--env", "staging"], "--env staging takes no local run (allow_local_run = false"),
        # without --mode tune these were dropped: one plain training instead of the study asked for
        (["--trials", "20"], "--trials applies to a study only: add --mode tune"),
        (["--trial-timeout", "300"], "--trial-timeout applies to a study only: add --mode tune"),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_parameters_that_failed_after_the_training(
    tmp_path: Path, args: list[str], message: str, dry_run: bool
) -> None:
    inputs = records(tmp_path / "inputs")
    work = tmp_path / "work"
    out = refused(tmp_path, "--work", str(work), "--reference", inputs["reference"], "--current",
                  inputs["current"], *args, dry_run=dry_run)  # fmt: skip
    assert message in out and not work.exists()


@pytest.mark.parametrize("missing", ["reference", "current", "loadtest"])
def test_missing_input_files_are_named_before_the_data_check(tmp_path: Path, missing: str) -> None:
    """A missing drift input failed drift-check (exit 1, after the data check); a missing load test failed
    `promote`, after the training and the export."""
    inputs = {**records(tmp_path / "inputs"), "loadtest": str(tmp_path / "loadtest.json")}
    (tmp_path / "loadtest.json").write_text("{}")
    inputs[missing] = str(tmp_path / "nowhere" / missing)
    work = tmp_path / "work"
    out = refused(tmp_path, "--work", str(work), *(a for k, v in inputs.items() for a in (f"--{k}", v)))
    assert f"error: --{missing} {inputs[missing]} does not exist" in out and not work.exists()


def test_a_work_in_use_is_refused_naming_the_run_that_holds_it(tmp_path: Path) -> None:
    work, store = tmp_path / "work", tmp_path / "store"
    reference = blocking_reference(tmp_path)
    args = ("--preset", "smoke", "--store", str(store), "--work", str(work), "--reference", reference,
            "--current", str(tmp_path))  # fmt: skip
    first = start(*args)
    try:
        wait_for(first, work / "logs" / "drift-check.log")
        second = start(*args)
        try:
            out, _ = second.communicate(timeout=60)
        finally:
            kill_session(second)
        assert second.returncode == 2, out
        holder = json.loads((work / ".pipeline.lock").read_text())
        assert f"--work {work} is in use by run {holder['run_id']} (pid {first.pid} on " in out, out
        assert "\nRUN " not in "\n" + out
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=60)
    finally:
        kill_session(first)
    assert first.returncode == 130, out
    # the first run's record is its own: the second wrote nothing
    (stored,) = (store / "sentiment" / "pipeline-runs").glob("*.json")
    assert json.loads(stored.read_text())["run_id"] == holder["run_id"]


def test_runs_started_together_each_get_their_own_work(tmp_path: Path) -> None:
    """Two cron entries at the same minute (dev and another environment) without --work."""
    reference = blocking_reference(tmp_path)
    args = ("--preset", "smoke", "--store", str(tmp_path / "store"), "--reference", reference,
            "--current", str(tmp_path))  # fmt: skip
    runs = [start(*args, cwd=tmp_path), start(*args, cwd=tmp_path)]
    works = tmp_path / "runs" / "pipeline"
    try:
        deadline = time.monotonic() + 60
        while len(list(works.glob("*/logs/drift-check.log"))) < 2:  # both at drift-check, each in its folder
            for proc in runs:
                assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, [str(p) for p in works.rglob("*")]
            time.sleep(0.1)
        holders = {json.loads((w / ".pipeline.lock").read_text())["pid"] for w in works.iterdir()}
        assert holders == {proc.pid for proc in runs} and len(list(works.iterdir())) == 2
        for proc in runs:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
    finally:
        for proc in runs:
            kill_session(proc)
    assert [proc.returncode for proc in runs] == [130, 130]
    assert len(list((tmp_path / "store" / "sentiment" / "pipeline-runs").glob("*.json"))) == 2


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_work_whose_candidate_finished_training_is_refused(tmp_path: Path, dry_run: bool) -> None:
    """WORK as a finished run leaves it: its record and its trained candidate (what its promotion names)."""
    work = tmp_path / "work"
    (work / "candidate" / "export").mkdir(parents=True)
    (work / "candidate" / "metrics.json").write_text('{"test": {"accuracy": 0.83}}')
    (work / "candidate" / "export" / "metadata.json").write_text('{"model_name": "sentiment-smoke"}')
    (work / "pipeline-run.json").write_text(
        json.dumps({"run_id": "20261206T084905Z-4322f2", "outcome": "promoted"})
    )
    before = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    inputs = records(tmp_path / "inputs")
    out = refused(tmp_path, "--work", str(work), "--reference", inputs["reference"], "--current",
                  inputs["current"], "--force", dry_run=dry_run)  # fmt: skip
    assert "holds the candidate that run 20261206T084905Z-4322f2 (outcome: promoted) trained" in out, out
    assert "Give this run a new --work" in out
    assert {p: p.read_bytes() for p in work.rglob("*") if p.is_file()} == before


@pytest.mark.integration
def test_a_store_that_refuses_the_record_leaves_it_in_work_and_says_so(tmp_path: Path) -> None:
    """A --store the run cannot write: the run used to end in a traceback with no record anywhere."""
    (tmp_path / "not-a-folder").write_text("a file where the store's folder should be\n")
    store, work = tmp_path / "not-a-folder" / "store", tmp_path / "work"
    (tmp_path / "current").mkdir()
    (tmp_path / "reference.jsonl").write_text("this is not JSON\n")  # drift-check fails at once: a short run
    proc = start("--preset", "smoke", "--store", str(store), "--work", str(work),
                         "--reference", str(tmp_path / "reference.jsonl"), "--current", str(tmp_path / "current"))  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        kill_session(proc)
    assert proc.returncode == 1, out
    assert "Traceback" not in out, out
    record = json.loads((work / "pipeline-run.json").read_text())
    assert record["outcome"].startswith("failed at"), record["outcome"]
    assert record["record_uri"].startswith(str(store)) and "could not be written" in record["record_error"]
    assert f"it is in {work / 'pipeline-run.json'}" in out, out
