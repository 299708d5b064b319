"""`python -m training train` run as users and Jobs run it, aimed at one --output: two runs at once, and a resume
with another learning rate."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from training.errors import EXIT_OK, EXIT_PREEMPTED, EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]
SMALL = ["export=false", "data.max_train_rows=240", "checkpoint.every_steps=5", "eval_every_steps=10"]


def _train(out: Path, *overrides: str) -> list[str]:
    return [sys.executable, "-m", "training", "train", "--preset", "smoke", "--output", str(out), *overrides]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.integration
def test_a_second_run_into_a_busy_output_is_refused_and_the_first_is_untouched(tmp_path: Path) -> None:
    """Both used to exit 0: each pruned the other's checkpoints and best-<n> folders, one scored its last weights
    instead of its best ("the recorded best checkpoint ... is missing"), and model/ and metrics.json came from
    whichever finished last."""
    out = tmp_path / "run"
    first = subprocess.Popen(
        _train(out, *SMALL, "epochs=50"),
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        manifest = out / "checkpoints" / "step-000000005" / "MANIFEST.json"
        while not manifest.exists():
            assert first.poll() is None, first.communicate()[1][-3000:]
            time.sleep(0.05)
        second = subprocess.run(
            _train(out, *SMALL, "optim.lr=1e-4"),
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert first.poll() is None, "the first run must still be training"
        first.send_signal(signal.SIGTERM)
        _, log = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.returncode == EXIT_USAGE, second.stderr[-3000:]
    assert f"{out} is in use by another training run (pid {first.pid} on " in second.stderr, second.stderr
    assert "give this run its own --output" in second.stderr
    assert "Traceback" not in second.stderr
    assert first.returncode == EXIT_PREEMPTED, log[-3000:]
    # Nothing of the refused run reached the folder: the first resumes alone, its lock gone with its process.
    step = json.loads((out / "preempted.json").read_text())["step"]
    done = subprocess.run(
        _train(out, *SMALL, "epochs=50", "max_steps=" + str(step + 5)),
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    assert f"resumed from {out / 'checkpoints'}/step-{step:09d}" in done.stderr
    assert "missing or broken" not in done.stderr


def test_a_resume_with_another_learning_rate_trains_at_it(tmp_path: Path) -> None:
    """Lowering optim.lr to resume a run (after a loss spike, say) was logged as "applied" and recorded in the next
    checkpoints' config, while the restored optimizer and scheduler states kept training at the old peak."""
    from tests.training.test_train import _config, _sigterm_after
    from training.trainer import run

    out = tmp_path / "run"
    thread = _sigterm_after(out / "checkpoints" / "step-000000010")
    assert run(_config(), out) == EXIT_PREEMPTED
    thread.join()
    stopped = json.loads((out / "preempted.json").read_text())["step"]

    lr = 1e-5  # the smoke preset's is 3e-3
    assert run(_config(f"optim.lr={lr}", "optim.weight_decay=0.5"), out) == EXIT_OK
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["attempts"] == 2
    after = [row for row in metrics["history"] if "lr" in row and row["step"] > stopped]
    assert after, metrics["history"]
    # 30 steps, 3 of warmup: the linear decay to 0 continues from the resumed step, at the new peak.
    for row in after:
        assert row["lr"] == pytest.approx(lr * (30 - row["step"]) / 27, rel=1e-6), row
    saved = json.loads((out / "checkpoints" / "step-000000030" / "trainer.json").read_text())
    assert saved["config"]["optim"]["lr"] == lr
    import torch

    groups = torch.load(out / "checkpoints" / "step-000000030" / "state.pt", weights_only=False)["optimizer"]
    assert [g["weight_decay"] for g in groups["param_groups"]] == [0.5, 0.0]


def test_an_output_that_is_a_file_is_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """--output naming a file (or below one) ended in a FileExistsError/NotADirectoryError traceback, exit 1."""
    from training.cli import main

    taken = tmp_path / "taken"
    taken.write_text("a user's file")
    for output in (taken, taken / "run"):
        assert main(["train", "--preset", "smoke", "--output", str(output), "export=false"]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert f"config --output: cannot use {output} as the run folder" in err, err
        assert "give a writable folder" in err
    assert taken.read_text() == "a user's file"
