"""The training loop in-process on the smoke preset: outputs, and interrupted + resumed == uninterrupted."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from training import presets
from training.config import apply_overrides
from training.errors import EXIT_OK, EXIT_PREEMPTED
from training.trainer import run

# 240 training rows, batch 16: 15 steps per epoch, 30 in all, a checkpoint every 5.
SMALL = [
    "export=false",
    "data.max_train_rows=240",
    "checkpoint.every_steps=5",
    "eval_every_steps=10",
    "epochs=2",
]


def _config(*extra: str):  # noqa: ANN202
    return apply_overrides(presets.smoke(), [*SMALL, *extra])


def _sigterm_after(checkpoint: Path, timeout: float = 300) -> threading.Thread:
    """SIGTERM this process once the checkpoint's manifest exists (the loop is then mid-run)."""

    def fire() -> None:
        deadline = time.monotonic() + timeout
        while not (checkpoint / "MANIFEST.json").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=fire, daemon=True)
    thread.start()
    return thread


def _comparable(metrics: dict) -> dict:
    """What must match exactly: scores and the per-step loss/lr/validation history (not timings)."""
    history = [{k: v for k, v in row.items() if k not in ("samples_per_s",)} for row in metrics["history"]]
    return {k: metrics[k] for k in ("test", "validation", "steps", "epochs_run", "best_step")} | {
        "history": history
    }


@pytest.mark.slow
def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    config = _config()
    assert run(config, tmp_path / "full") == EXIT_OK
    full = json.loads((tmp_path / "full" / "metrics.json").read_text())
    assert full["steps"] == 30 and full["epochs_run"] == 2

    out = tmp_path / "interrupted"
    thread = _sigterm_after(out / "checkpoints" / "step-000000010")
    assert run(config, out) == EXIT_PREEMPTED
    thread.join()
    pre = json.loads((out / "preempted.json").read_text())
    assert pre["reason"] == "SIGTERM" and 10 <= pre["step"] < 30
    assert pre["save_seconds"] < 20
    assert not (out / "metrics.json").exists()

    # Break the newest checkpoint: resume must skip it and fall back to the one before.
    newest = sorted((out / "checkpoints").glob("step-*"))[-1]
    state = newest / "state.pt"
    state.write_bytes(state.read_bytes()[:1000])

    assert run(config, out) == EXIT_OK
    resumed = json.loads((out / "metrics.json").read_text())
    assert resumed["attempts"] == 2
    assert _comparable(resumed) == _comparable(full)
    a = load_file(tmp_path / "full" / "model" / "model.safetensors")
    b = load_file(out / "model" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_outputs_follow_the_contract(tmp_path: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out = tmp_path / "run"
    config = _config("epochs=1", "patience=1", "mlflow=true")
    os.environ.pop("TRAINING_MLFLOW", None)
    assert run(config, out) == EXIT_OK
    m = json.loads((out / "metrics.json").read_text())
    for split in ("test", "validation"):
        assert set(m[split]) == {"accuracy", "f1", "auc"}
    assert set(m["baselines"]) == {"majority", "tfidf_logreg"}
    assert set(m["baselines"]["tfidf_logreg"]) == {"accuracy", "f1", "auc"}
    assert m["beats_tfidf"] == (m["test"]["accuracy"] > m["baselines"]["tfidf_logreg"]["accuracy"])
    assert m["train_samples_per_s"] > 0 and m["steps"] == 15 and m["epochs_run"] == 1
    assert any("val_accuracy" in row for row in m["history"]) and any("loss" in row for row in m["history"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert m["dataset_manifest_sha256"] == manifest["sha256"]
    assert manifest["splits"]["train"]["rows"] == 240
    cost = json.loads((out / "cost.json").read_text())
    assert cost["instance_type"] == "cpu" and cost["prices_as_of"]
    assert cost["storage_bytes"] > 0
    # The best model is a Hugging Face folder that predicts 2 classes.
    model = AutoModelForSequenceClassification.from_pretrained(out / "model")
    tokenizer = AutoTokenizer.from_pretrained(out / "model")
    logits = model(**tokenizer(["what a lovely day"], return_tensors="pt")).logits
    assert tuple(logits.shape) == (1, 2)
    assert model.config.id2label == {0: "negative", 1: "positive"}
    # MLflow file store got the params and the per-step metrics.
    runs = list((out / "mlruns").glob("*/*/metrics/loss"))
    assert runs, "no MLflow loss metric recorded"
    assert len(runs[0].read_text().splitlines()) >= 3
    # `evaluate` scores the saved model on the same test split to the same numbers.
    from training.cli import main

    assert (
        main(
            [
                "evaluate",
                "--model",
                str(out / "model"),
                "--preset",
                "smoke",
                "--out",
                str(out / "eval.json"),
                *SMALL,
            ]
        )
        == 0
    )
    scored = json.loads((out / "eval.json").read_text())
    assert scored["dataset_manifest_sha256"] == m["dataset_manifest_sha256"]
    assert scored["test"] == pytest.approx(m["test"], abs=1e-6)
    # A rerun on a finished checkpoint does not train again.
    assert run(config, out) == EXIT_OK
    again = json.loads((out / "metrics.json").read_text())
    assert again["steps"] == 15 and again["checkpoint"]["saves_this_attempt"] == 0
    assert again["data"]["split_cache"] == "hit" and again["data"]["token_cache"] == "hit"


@pytest.mark.slow
def test_an_export_failure_after_training_says_the_model_is_safe_and_how_to_redo_only_the_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export runs at the end of a run that may take hours; its failure said only what failed, and a rerun
    of `train` repeats the same export. The message now names the saved model and the command that redoes only
    the export: the test runs that command."""
    import re
    import shlex
    import subprocess
    import sys

    from training import export
    from training.export_errors import ExportError, ParityError

    def fail(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise ParityError(
            "max |logit difference| 0.3 over tolerance 1e-3 on 2 texts: export with --no-optimize"
        )

    monkeypatch.setattr(export, "export_bundle", fail)
    out = tmp_path / "run"
    with pytest.raises(ExportError) as caught:
        run(_config("export=true", "max_steps=5", "epochs=1"), out)
    message = str(caught.value)
    assert "--no-optimize" in message and "the training itself finished" in message
    assert (out / "model" / "config.json").exists() and (out / "metrics.json").exists()
    (command,) = re.findall(r"`(python -m training export [^`]+)`", message)
    argv = shlex.split(command)
    done = subprocess.run(
        [sys.executable, *argv[1:], "--preset", "smoke", "--n-texts", "8"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "export" / "model.onnx").exists()
