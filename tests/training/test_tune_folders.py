"""`python -m training tune` (the real CLI) and the folders its trials resume from: a trial must never find
checkpoints that are not its own, or it "resumes" them and reports their score under its own parameters."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.training.test_tune import ROOT, _cli, lr_space, study
from training.errors import EXIT_OK, EXIT_USAGE


def _files(*roots: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for root in roots for p in root.rglob("*") if p.is_file()}


@pytest.mark.integration
def test_trials_get_their_own_checkpoints_and_another_study_never_resumes_them(tmp_path: Path) -> None:
    space_file = lr_space(tmp_path, [3e-3, 1e-5], epochs="1", eval_every_steps="25")
    shared = tmp_path / "ckpt"
    env = {**os.environ, "TRAINING_MLFLOW": "0", "TRAINING_CHECKPOINT_URI": str(shared)}
    first_out = tmp_path / "study"
    cmd = _cli(first_out, space_file, "--trials", "2", "--trial-timeout", "60", "--sampler", "grid")
    first = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == EXIT_OK, first.stderr[-3000:]
    # $TRAINING_CHECKPOINT_URI (the image's checkpoint place) used to be one store for every trial: trial 1
    # "resumed" trial 0's finished checkpoint, trained nothing and reported trial 0's score as its own.
    assert "resumed from" not in first.stderr, first.stderr[-3000:]
    assert sorted(p.name for p in shared.iterdir()) == ["trial-0", "trial-1"]
    for n in (0, 1):  # each trial trained itself: one attempt, its own steps
        metrics = json.loads((first_out / "trials" / str(n) / "metrics.json").read_text())
        assert metrics["attempts"] == 1 and metrics["steps"] > 0, metrics
    assert len(study(first_out)["trials"]) == 2
    kept = _files(first_out, shared)

    # Another study into the same folders: a new --study-name (as a new --preset or a deleted study.db is). Its
    # trial 0 resumed the first study's finished trial 0 and reported it under its own parameters.
    again = subprocess.run(
        [*cmd, "--study-name", "another"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == EXIT_USAGE, again.stderr[-3000:]
    assert (
        f"config --output: {first_out / 'trials'} holds trial folders 0, 1 of trials that study"
        in again.stderr
    )
    assert "'another' does not have" in again.stderr and "Give this study a new --output" in again.stderr
    assert "Traceback" not in again.stderr

    # A new --output with the same checkpoint prefix (a Job's pod starts with an empty folder): the bucket's
    # trial-<n> are what it would resume.
    fresh = subprocess.run(
        _cli(tmp_path / "fresh", space_file, "--trials", "2", "--trial-timeout", "60"),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fresh.returncode == EXIT_USAGE, fresh.stderr[-3000:]
    assert (
        f"config --checkpoint-uri (or checkpoint.uri, $TRAINING_CHECKPOINT_URI): {shared} holds trial "
        in (fresh.stderr)
    )
    # Nothing of the first study changed (its study.db now also holds the empty study "another").
    unchanged = {p: b for p, b in kept.items() if p.name != "study.db"}
    assert {p: b for p, b in _files(first_out, shared).items() if p.name != "study.db"} == unchanged
