"""No two sampler processes of a study draw the same parameters (real Optuna on a real SQLite study, no training).

One `--seed` for every process made the workers of `launch --tune` sample the same parameters for their first
trials, and a worker rerun after a preemption sample trial 0's again: trials paid for twice on the GPU pool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from training import search_space
from training.tune import TuneConfig, open_study

pytest.importorskip("optuna", reason="optuna is the tuning dependency")


def _first_params(
    output: Path, worker: str | None, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, dict[str, Any]]:
    monkeypatch.delenv("JOB_COMPLETION_INDEX", raising=False)
    cfg = TuneConfig(preset="smoke", output=output, trials=8, trial_timeout_s=60, worker=worker, seed=0)
    space = search_space.load("smoke")
    study = open_study(cfg, space, "sentiment")
    trial = study.ask()
    return study, {p.key: p.suggest(trial) for p in space.params}  # what tune.run_trial asks


@pytest.mark.parametrize("sampler_workers", [("0", "1"), ("w-a", "w-b")])
def test_two_workers_of_one_study_draw_different_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sampler_workers: tuple[str, str]
) -> None:
    first, second = sampler_workers
    _, a = _first_params(tmp_path, first, monkeypatch)
    _, b = _first_params(tmp_path, second, monkeypatch)
    assert a != b


def test_a_reopened_study_does_not_draw_trial_0_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study, trial0 = _first_params(tmp_path, "0", monkeypatch)
    study.tell(study.trials[0].number, 0.8)
    _, again = _first_params(tmp_path, "0", monkeypatch)  # the same worker, rerun after exit 75
    assert again != trial0


def test_a_fresh_study_on_one_machine_is_reproducible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, a = _first_params(tmp_path / "a", None, monkeypatch)
    _, b = _first_params(tmp_path / "b", None, monkeypatch)
    assert a == b
