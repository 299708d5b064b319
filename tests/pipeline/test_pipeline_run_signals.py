"""Stopping `python -m pipeline run` (Ctrl-C, a cancelled CI job's SIGTERM) stops the running step, all of it, waits
for it and writes the run record; nothing of the run is left running.

It used to raise KeyboardInterrupt into the runner: a second signal while it waited for the stopped step (an
impatient second Ctrl-C, CI's SIGINT then SIGTERM) made it write the record and exit with the trainer still
running, orphaned, writing into WORK; a step that ignored SIGTERM was waited for forever, and whatever a step
had started was never signalled.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.pipeline.run_cli import (
    ROOT,
    RUNNER,
    assert_interrupted,
    kill_session,
    records,
    session,
    start,
    wait_for,
)

pytestmark = pytest.mark.integration


def test_a_second_signal_during_training_leaves_no_trainer_behind(tmp_path: Path) -> None:
    work, store = tmp_path / "work", tmp_path / "store"
    inputs = records(tmp_path / "inputs")
    proc = start("--preset", "smoke", "--force", "--store", str(store), "--work", str(work),
                 "--reference", inputs["reference"], "--current", inputs["current"])  # fmt: skip
    try:
        wait_for(
            proc, work / "logs" / "train.log", "training: step"
        )  # the loop runs: SIGTERM means checkpoint
        proc.send_signal(signal.SIGTERM)  # the runner only, as CI cancelling a job does
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=90)
        left = session(proc.pid)  # at once: the runner has exited
    finally:
        kill_session(proc)
    assert_interrupted(proc, out, left, work, "train", "SIGTERM")
    # The interrupted training is this WORK's to resume: not refused as a finished candidate would be.
    again = start("--dry-run", "--preset", "smoke", "--store", str(store), "--work", str(work))
    assert again.wait(timeout=60) == 0, again.communicate()[0]


# A step that will not stop on SIGTERM and has started a process of its own that will not either.
STUBBORN = textwrap.dedent(
    """
    import signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # inherits SIG_IGN
    print("ready", flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("how", ["SIGTERM to the runner", "Ctrl-C in its terminal"])
def test_a_step_that_ignores_sigterm_is_killed_with_what_it_started(tmp_path: Path, how: str) -> None:
    import subprocess

    work, store = tmp_path / "work", tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(store), str(work), STUBBORN], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(proc, work / "logs" / "data-check.log", "ready")
        if how == "Ctrl-C in its terminal":  # the terminal signals its foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        left = session(proc.pid)
    finally:
        kill_session(proc)
    sent = "SIGINT" if how == "Ctrl-C in its terminal" else "SIGTERM"
    record = assert_interrupted(proc, out, left, work, "data-check", sent)
    (stored,) = (store / "sentiment" / "pipeline-runs").glob("*.json")
    assert json.loads(stored.read_text()) == record


def test_a_runner_killed_outright_takes_its_step_with_it_and_work_stays_locked_until_then(
    tmp_path: Path,
) -> None:
    """SIGKILL (the OOM killer, CI's last resort) gives the runner no say: the step used to go on, unsignalled,
    writing into a WORK that the next run could take."""
    import subprocess

    work, store, stopped = tmp_path / "work", tmp_path / "store", tmp_path / "stopped"
    saves_then_exits = textwrap.dedent(
        f"""
        import pathlib, signal, sys, time
        def stop(signum, frame):
            time.sleep(2)  # a checkpoint being saved
            pathlib.Path({str(stopped)!r}).write_text(signal.Signals(signum).name)
            sys.exit(75)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(store), str(work), saves_then_exits], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    inputs = records(tmp_path / "inputs")
    args = ("--preset", "smoke", "--store", str(store), "--work", str(work), "--reference", inputs["reference"],
            "--current", inputs["current"])  # fmt: skip
    try:
        wait_for(proc, work / "logs" / "data-check.log", "ready")
        proc.kill()
        proc.wait()
        second = start(*args)
        try:
            out, _ = second.communicate(timeout=60)
        finally:
            kill_session(second)
        assert second.returncode == 2 and "is in use by run " in out, out
        deadline = time.monotonic() + 30
        while session(proc.pid):
            assert time.monotonic() < deadline, session(proc.pid)
            time.sleep(0.1)
    finally:
        kill_session(proc)
    assert stopped.read_text() == "SIGTERM"  # told to stop, it saved and exited
    from pipeline import supervise

    os.close(supervise.lock(work, "the-next-run", dt.datetime.now(dt.UTC)))  # and WORK is free again
