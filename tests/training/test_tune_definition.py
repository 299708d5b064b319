"""A resumed study (`tune`, same --output/--study-name) searches what it searched (training/tune_definition.py).

Before: a rerun with another --space or other overrides went on in the same study, and study.json ranked the trials
of both searches together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.test_tune import lr_space, space, study
from training.cli import main
from training.errors import EXIT_OK, EXIT_USAGE

TINY = {"epochs": "1", "data.max_train_rows": "48", "data.max_val_rows": "40"}


def _lr_range(tmp: Path, low: float) -> Path:
    return space(
        tmp,
        {"optim.lr": {"type": "float", "low": low, "high": 1e-2, "log": True, "grid": [3e-3, 5e-3]}},
        **TINY,
    )


def _tune(out: Path, space_file: Path, trials: int, *overrides: str) -> int:
    return main([
        "tune", "--preset", "smoke", "--space", str(space_file), "--output", str(out), "--trials", str(trials),
        "--trial-timeout", "60", "--pruner", "none", "--sampler", "grid", *overrides,
    ])  # fmt: skip


def test_a_resumed_study_refuses_another_space_or_other_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space_file = _lr_range(tmp_path, 1e-3)
    out = tmp_path / "study"
    assert _tune(out, space_file, 1) == EXIT_OK
    assert len(study(out)["trials"]) == 1
    capsys.readouterr()

    assert _tune(out, space_file, 2, "optim.weight_decay=0.05") == EXIT_USAGE
    err = capsys.readouterr().err
    assert "config overrides:" in err and "optim.weight_decay: 0.01 -> 0.05" in err, err
    assert f"--space {space_file}" in err and "its own --output" in err, err

    # A wider lr range: its trials would be sampled from another space than the study's.
    other = tmp_path / "other"
    other.mkdir()
    assert _tune(out, _lr_range(other, 1e-5), 2) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "config --space: study 'sentiment-smoke-smoke' searches something other than this run does" in err
    assert "params optim.lr: {'kind': 'float', 'low': 0.001" in err and "'low': 1e-05" in err, err
    assert len(study(out)["trials"]) == 1  # no trial of another search joined the study

    # The same search resumes, wherever its space file lives; settings of how trials run may change.
    copy = tmp_path / "copy.json"
    copy.write_text(space_file.read_text())
    assert _tune(out, copy, 2, "mlflow=false") == EXIT_OK
    assert [t["state"] for t in study(out)["trials"]] == ["COMPLETE", "COMPLETE"]


def test_the_definition_lives_in_the_study_storage(tmp_path: Path) -> None:
    import optuna

    space_file = lr_space(tmp_path, [3e-3], **TINY)
    out = tmp_path / "study"
    assert _tune(out, space_file, 1, "seed=3") == EXIT_OK
    stored = optuna.load_study(study_name="sentiment-smoke-smoke", storage=f"sqlite:///{out / 'study.db'}")
    recorded = stored.user_attrs["definition"]
    assert recorded["preset"] == "smoke" and recorded["overrides"] == ["seed=3"]
    assert recorded["config"]["seed"] == 3 and recorded["config"]["epochs"] == 1
    assert set(recorded["params"]) == {"optim.lr"} and "checkpoint.every_minutes" not in recorded["config"]
    json.dumps(recorded)  # what another worker reads back
