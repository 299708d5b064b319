"""Resume rules: the best model is the recorded best step, world-size changes, the preemption-loop cap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training import checkpoint as ckpt
from training import presets, resume_checks
from training import state as state_mod
from training.config import apply_overrides
from training.errors import EXIT_OK, EXIT_PREEMPTION_LIMIT, ConfigError, PreemptionLimit

SMALL = ["export=false", "baselines=false", "data.max_train_rows=160", "epochs=2", "eval_every_steps=5"]


def test_demo_keeps_two_checkpoints_so_a_corrupt_newest_has_a_fallback() -> None:
    assert presets.demo().checkpoint.keep_last >= 2
    assert all(presets.get(name).checkpoint.keep_last >= 2 for name in presets.PRESETS)


def test_best_model_is_the_recorded_best_step_not_the_newest_folder(tmp_path: Path) -> None:
    """A best-<n> folder from a lost history (newer by name) must neither be loaded nor survive pruning."""
    import torch

    from training.model import build_model
    from training.trainer import run

    config = apply_overrides(presets.smoke(), SMALL)
    store = ckpt.Store(str(tmp_path / "run" / "checkpoints"))
    stale = build_model(config.model, config.data.labels, seed=123)
    for p in stale.parameters():
        p.data.fill_(0.5)  # weights no run would reach: recognisable if loaded
    ckpt.write_checkpoint(
        store,
        "best-999999999",
        {"model.pt": state_mod.torch_bytes(stale.state_dict())},
        meta={"step": 999999999},
    )
    assert run(config, tmp_path / "run") == EXIT_OK
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["best_step"] is not None and metrics["best_step"] < 999999999
    assert store.dirs(ckpt.BEST_PREFIX) == [ckpt.step_name(metrics["best_step"], ckpt.BEST_PREFIX)]
    from transformers import AutoModelForSequenceClassification

    saved = AutoModelForSequenceClassification.from_pretrained(tmp_path / "run" / "model")
    assert not all(torch.all(p == 0.5) for p in saved.parameters())


def test_recorded_best_never_falls_back_to_another_folder(tmp_path: Path) -> None:
    store = ckpt.Store(str(tmp_path))
    ckpt.write_checkpoint(store, "best-000000020", {"model.pt": b"newer"}, meta={"step": 20})
    ckpt.write_checkpoint(store, "best-000000010", {"model.pt": b"recorded"}, meta={"step": 10})
    assert ckpt.recorded_best(store, 10).files["model.pt"] == b"recorded"
    assert ckpt.recorded_best(store, 30) is None and ckpt.recorded_best(store, None) is None
    assert ckpt.prune_best(store, 10) == ["best-000000020"]


def _trainer_json(world_size: int, batch_in_epoch: int, epoch: int = 1) -> dict:
    return {"world_size": world_size, "state": {"batch_in_epoch": batch_in_epoch, "epoch": epoch}}


def test_resume_with_another_world_size_mid_epoch_is_refused_clearly() -> None:
    with pytest.raises(ConfigError) as info:
        resume_checks.check_world_size(_trainer_json(2, 7), "s3://b/run/step-000000042", 4)
    message = str(info.value)
    assert "saved by 2 processes" in message and "with 4 processes" in message and "Resume with 2" in message
    # Same world size, or an epoch boundary (nothing half consumed): exact, allowed.
    resume_checks.check_world_size(_trainer_json(2, 7), "x", 2)
    resume_checks.check_world_size(_trainer_json(2, 0), "x", 4)


def test_resume_with_another_world_size_refuses_in_a_real_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint written mid-epoch by 2 ranks, resumed by 1: exit 2 with the message, no silent mis-position."""
    from training.cli import main

    out = tmp_path / "run"
    assert main(["train", "--preset", "smoke", "--output", str(out), *SMALL, "max_steps=3"]) == EXIT_OK
    store = ckpt.Store(str(out / "checkpoints"))
    found = ckpt.latest(store)
    trainer = json.loads(found.files["trainer.json"])
    trainer["world_size"], trainer["state"]["batch_in_epoch"], trainer["state"]["finished"] = 2, 3, False
    files = {**found.files, "trainer.json": json.dumps(trainer).encode()}
    ckpt.write_checkpoint(store, "step-000000004", files, meta={"step": 4})
    capsys.readouterr()
    assert main(["train", "--preset", "smoke", "--output", str(out), *SMALL]) == 2
    assert "saved by 2 processes in the middle of epoch" in capsys.readouterr().err


def test_preemption_cap_refuses_with_its_own_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINING_MAX_PREEMPTIONS", "3")
    resume_checks.check_preemption_cap(state_mod.State(preemptions=2))
    with pytest.raises(PreemptionLimit) as info:
        resume_checks.check_preemption_cap(state_mod.State(preemptions=3))
    assert info.value.exit_code == EXIT_PREEMPTION_LIMIT
    assert "TRAINING_MAX_PREEMPTIONS" in str(info.value)
    monkeypatch.setenv("TRAINING_MAX_PREEMPTIONS", "0")  # 0 disables
    resume_checks.check_preemption_cap(state_mod.State(preemptions=1000))


def _mid_epoch_checkpoint(out: Path) -> None:
    """A finished 3-step run whose newest checkpoint is rewritten as stopped at micro-batch 3 of epoch 0."""
    from training.cli import main

    assert main(["train", "--preset", "smoke", "--output", str(out), *SMALL, "max_steps=3"]) == EXIT_OK
    store = ckpt.Store(str(out / "checkpoints"))
    found = ckpt.latest(store)
    trainer = json.loads(found.files["trainer.json"])
    assert trainer["state"]["batch_in_epoch"] == 3 and trainer["config"]["batch_size"] == 16
    trainer["state"]["finished"] = False
    files = {**found.files, "trainer.json": json.dumps(trainer).encode()}
    ckpt.write_checkpoint(store, "step-000000004", files, meta={"step": 4})


@pytest.mark.integration
def test_mid_epoch_resume_with_another_batch_size_is_refused_not_spun_forever(tmp_path: Path) -> None:
    """batch_size=64 cuts 160 rows into 3 batches, the checkpoint was at batch 3 of 10: the loop ran no step
    and never left the epoch (100% CPU, SIGTERM ignored) until the Job's deadline. Now exit 2 with the fix."""
    import subprocess
    import sys

    out = tmp_path / "run"
    _mid_epoch_checkpoint(out)
    cmd = [sys.executable, "-m", "training", "train", "--preset", "smoke", "--output", str(out), *SMALL]
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([*cmd, "batch_size=64"], cwd=repo, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "config batch_size: checkpoint" in done.stderr and "micro-batch 3" in done.stderr
    assert "Resume with batch_size=16" in done.stderr
    # The same config resumes and finishes; so does another batch size from an epoch boundary.
    assert subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300).returncode == EXIT_OK


def test_batch_order_check_allows_epoch_boundaries_and_other_settings() -> None:
    config = presets.smoke()
    saved = {"state": {"batch_in_epoch": 5, "epoch": 1}, "config": config.to_dict()}
    resume_checks.check_batch_order(saved, "x", apply_overrides(config, ["optim.lr=1e-4", "epochs=9"]))
    boundary = {**saved, "state": {"batch_in_epoch": 0, "epoch": 2}}
    resume_checks.check_batch_order(boundary, "x", apply_overrides(config, ["batch_size=64"]))
    with pytest.raises(ConfigError, match=r"data.max_length=64; this run has data.max_length=32"):
        resume_checks.check_batch_order(saved, "x", apply_overrides(config, ["data.max_length=32"]))


def test_resume_false_over_another_runs_checkpoints_is_refused_and_loses_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """checkpoint.resume=false into a used checkpoint.uri: pruning deleted the new run's checkpoints as they were
    saved (the old run's steps are higher) and the new best-<n> replaced or pruned the old run's best weights."""
    from training.cli import main

    out = tmp_path / "run"
    store = ckpt.Store(str(out / "checkpoints"))
    old = {
        "best-000000005": {"model.pt": b"old run's best"},
        "step-000000030": {"state.pt": b"s", "trainer.json": b"{}"},
    }
    for name, files in old.items():
        ckpt.write_checkpoint(store, name, files, meta={"step": int(name[-9:])})
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    overrides = [*SMALL, "max_steps=12", "checkpoint.every_steps=5", "checkpoint.resume=false"]
    assert main(["train", "--preset", "smoke", "--output", str(out), *overrides]) == 2
    err = capsys.readouterr().err
    assert (
        "config checkpoint.resume: is false, but" in err
        and "best-000000005" in err
        and "new checkpoint.uri" in err
    )
    assert {
        p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and "checkpoints" in p.parts
    } == before
    # An empty (or new) checkpoint.uri starts fresh as asked.
    fresh = [*overrides, f"checkpoint.uri={tmp_path / 'fresh'}"]
    assert main(["train", "--preset", "smoke", "--output", str(out), *fresh]) == EXIT_OK
