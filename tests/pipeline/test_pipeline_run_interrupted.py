"""An interrupted run says so, whatever the interrupted step exited with, and its promote step leaves no lock.

A step that stops cleanly on SIGTERM (exit 0) was counted as succeeded: the steps after it were skipped for the
interruption, and the outcome, read off those skips, was "no retraining needed", a decision no step had made. A
signal between two steps did the same. The promote step ran promotion in its own process without the CLI's
SIGTERM handling: stopping the run there ended it on the spot, and the environment's promotion lock stayed behind,
refusing every later promotion of it until someone ran `python -m promotion unlock`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import textwrap
from pathlib import Path

import pytest

from tests.pipeline.run_cli import (
    assert_interrupted,
    kill_session,
    session,
    start_runner,
    stub,
    wait_for,
    writes,
)

pytestmark = pytest.mark.integration

# Stops cleanly on SIGTERM, as a step that traps it (a shell script, a server's graceful shutdown) does.
CLEAN_STOP = textwrap.dedent(
    """
    import signal, sys, time
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    time.sleep(600)
    """
)


def _ran(work: Path) -> list[str]:
    return sorted(p.stem for p in (work / "logs").glob("*.log"))


def test_a_step_that_exits_0_on_sigterm_is_recorded_as_interrupted(tmp_path: Path) -> None:
    work, store = tmp_path / "work", tmp_path / "store"
    import sys

    proc = start_runner(
        {"store": str(store), "work": str(work)},
        {"data-check": [sys.executable, "-c", CLEAN_STOP], "drift-check": stub("pass")},
    )
    try:
        wait_for(proc, work / "logs" / "data-check.log", "ready")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        left = session(proc.pid)
    finally:
        kill_session(proc)
    record = assert_interrupted(proc, out, left, work, "data-check", "SIGTERM")
    assert record["outcome"] != "no retraining needed"
    assert _ran(work) == ["data-check"], "a step ran after the interruption"
    assert "data-check exited 0 after it was told to stop: recorded as interrupted" in out, out


def test_a_signal_between_steps_is_the_outcome_not_a_decision(tmp_path: Path) -> None:
    """decide-retrain said retrain; SIGTERM came before train started: the record used to say no retraining was
    needed."""
    work, store = tmp_path / "work", tmp_path / "store"
    proc = start_runner(
        {"store": str(store), "work": str(work)},
        {
            "data-check": stub("pass"),
            "drift-check": stub("pass"),
            "decide-retrain": writes(work / "decisions" / "decide-retrain.flag"),
        },
        signal_after="condition decide-retrain = true",
    )
    try:
        out, _ = proc.communicate(timeout=60)
        left = session(proc.pid)
    finally:
        kill_session(proc)
    assert proc.returncode == 130, out
    assert left == [], left
    record = json.loads((work / "pipeline-run.json").read_text())
    steps = {s["step"]: s for s in record["steps"]}
    assert record["interrupted"] == "SIGTERM", record
    assert record["outcome"] == "interrupted before train (SIGTERM)", record["outcome"]
    assert steps["decide-retrain"]["status"] == "succeeded"
    assert steps["train"] == {"step": "train", "status": "skipped", "why": "the run was interrupted"}
    assert steps["evaluate"]["why"] == "train skipped", steps["evaluate"]
    assert _ran(work) == ["data-check", "decide-retrain", "drift-check"], "a step ran after the interruption"


def test_sigterm_during_promote_removes_the_promotion_lock(tmp_path: Path) -> None:
    """The real promote step (`python -m pipeline step promote`), held inside the lock by a history that does not
    answer (a FIFO: reading it blocks, as a store that hangs does), is stopped by the runner's SIGTERM."""
    from tests.promotion.promotion_fixtures import loadtest, make_candidate, policy_report, write_json

    work, store, cwd = tmp_path / "work", tmp_path / "store", tmp_path / "cwd"
    candidate = make_candidate(tmp_path / "trained")
    write_json(
        cwd / "reports" / "policy" / "dev.json", policy_report("dev")
    )  # the step's default, from its cwd
    history = store / "sentiment" / "environments" / "dev.json"
    history.parent.mkdir(parents=True)
    os.mkfifo(history)
    flags = work / "decisions"
    proc = start_runner(
        {
            "store": str(store),
            "work": str(work),
            "env": "dev",
            "local": "true",
            "loadtest": str(write_json(tmp_path / "loadtest.json", loadtest())),
        },
        {
            "data-check": stub("pass"),
            "drift-check": stub("pass"),
            "decide-retrain": writes(flags / "decide-retrain.flag"),
            "train": stub(f"import shutil; shutil.copytree({str(candidate)!r}, {str(work / 'candidate')!r})"),
            "evaluate": writes(flags / "evaluate.flag"),
            "export": stub("pass"),
            "images": writes(flags / "images.flag"),
        },
        cwd=cwd,
    )
    lock = store / "sentiment" / "environments" / "dev.lock"
    try:
        wait_for(proc, lock)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        left = session(proc.pid)
    finally:
        kill_session(proc)
    assert_interrupted(proc, out, left, work, "promote", "SIGTERM")
    assert not lock.exists(), f"the promote step left the lock {lock}: {out}"
    assert "promotion: terminated (SIGTERM)" in (work / "logs" / "promote.log").read_text()
    shutil.rmtree(store / "sentiment" / "environments")  # the FIFO: nothing may be left waiting on it
