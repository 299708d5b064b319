"""Training in real processes: SIGTERM -> checkpoint + exit 75 -> restart; DDP with torchrun; S3 over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.training.picked_ports import smoke_training
from training.errors import EXIT_OK, EXIT_PREEMPTED

REPO = Path(__file__).resolve().parents[2]
SMALL = ["export=false", "data.max_train_rows=240", "checkpoint.every_steps=5", "eval_every_steps=10"]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"trainer exited {proc.returncode} before {path} appeared")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{path} did not appear within {timeout} s")
        time.sleep(0.05)


@pytest.mark.integration
@pytest.mark.slow
def test_sigterm_saves_exits_75_and_restart_finishes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = smoke_training(out, *SMALL, "epochs=3")
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        _wait_for(out / "checkpoints" / "step-000000010" / "MANIFEST.json", proc)
        proc.send_signal(signal.SIGTERM)
        log, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_PREEMPTED, log[-3000:]
    pre = json.loads((out / "preempted.json").read_text())
    assert pre["reason"] == "SIGTERM" and pre["step"] >= 10
    assert pre["save_seconds"] < 20, "the save must fit well inside a 30 s preemption notice"
    assert (out / "checkpoints" / f"step-{pre['step']:09d}" / "MANIFEST.json").exists()
    assert not (out / "metrics.json").exists()

    done = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    assert f"resumed from {out / 'checkpoints'}/step-{pre['step']:09d}" in done.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 45 and metrics["attempts"] == 2
    assert not (out / "preempted.json").exists()


@pytest.mark.integration
@pytest.mark.slow
def test_cloud_interruption_notice_takes_the_same_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.training.test_preemption import FakeMetadata
    from training import presets
    from training.config import apply_overrides
    from training.trainer import run

    fake = FakeMetadata()
    fake.thread.start()
    out = tmp_path / "run"
    monkeypatch.setenv("TRAINING_INTERRUPTION_PROVIDER", "aws")
    monkeypatch.setenv("TRAINING_METADATA_ENDPOINT", fake.url)
    monkeypatch.setenv("TRAINING_INTERRUPTION_POLL_S", "0.05")

    def flip() -> None:
        while not (out / "checkpoints" / "step-000000005" / "MANIFEST.json").exists():
            time.sleep(0.01)
        fake.interrupt()

    threading.Thread(target=flip, daemon=True).start()
    try:
        code = run(apply_overrides(presets.smoke(), SMALL), out)
    finally:
        fake.server.shutdown()
        fake.server.server_close()
    assert code == EXIT_PREEMPTED
    pre = json.loads((out / "preempted.json").read_text())
    assert pre["reason"].startswith("aws spot terminate")


@pytest.mark.integration
@pytest.mark.slow
def test_ddp_two_cpu_processes(tmp_path: Path) -> None:
    out = tmp_path / "ddp"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    cmd = [*torchrun, *smoke_training(out, *SMALL, "epochs=1")[1:]]
    done = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == EXIT_OK, done.stderr[-4000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2
    # 240 rows over 2 ranks in batches of 16: 8 steps, each seeing 32 rows.
    assert metrics["steps"] == 8
    manifest = json.loads((out / "checkpoints" / "step-000000008" / "MANIFEST.json").read_text())
    assert {"rank-00000.pt", "rank-00001.pt", "state.pt", "trainer.json"} <= set(manifest["files"])
    assert "[rank 1]" not in done.stderr.replace("[rank 1] WARNING", "").replace("[rank 1] ERROR", "")


@pytest.mark.integration
@pytest.mark.slow
def test_data_and_checkpoints_through_s3(tmp_path: Path, s3_env: str, csv_file) -> None:  # noqa: ANN001
    import boto3

    from training import presets
    from training.config import apply_overrides
    from training.trainer import run

    s3 = boto3.client("s3", endpoint_url=s3_env)
    s3.create_bucket(Bucket="ml-data", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"})
    s3.upload_file(str(csv_file()), "ml-data", "sentiment/train.csv")
    config = apply_overrides(
        presets.smoke(),
        [
            "export=false",
            "epochs=1",
            "data.source=s3://ml-data/sentiment/train.csv",
            "data.max_test_rows=none",
            "checkpoint.uri=s3://ml-data/checkpoints/run1",
            "checkpoint.every_steps=5",
        ],
    )
    assert run(config, tmp_path / "first") == EXIT_OK
    first = json.loads((tmp_path / "first" / "metrics.json").read_text())
    assert first["data"]["split_cache"] == "miss" and first["data"]["bytes_read_from_source"] > 0
    assert not (tmp_path / "first" / "checkpoints").exists()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="ml-data", Prefix="checkpoints/run1/")["Contents"]]
    assert any(k.endswith("MANIFEST.json") and "/step-" in k for k in keys)
    assert any("/best-" in k for k in keys)

    # A rerun (e.g. a rescheduled pod) reads no data bytes from the bucket and resumes from it.
    assert run(config, tmp_path / "second") == EXIT_OK
    second = json.loads((tmp_path / "second" / "metrics.json").read_text())
    assert second["data"] == {"bytes_read_from_source": 0, "split_cache": "hit", "token_cache": "hit"}
    assert second["steps"] == first["steps"] and second["test"] == first["test"]
    assert second["checkpoint"]["saves_this_attempt"] == 0
