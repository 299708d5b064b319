"""A promotion stopped during its deploy half leaves a record that says so (promotion/interrupted.py).

SIGTERM (the pipeline runner, a deleted pod, a cancelled CI job) or Ctrl-C while `up`, the smoke check or the
rollback redeploy ran stopped the command and removed the lock, but wrote nothing: the environment might run the new
image, the old one or a half-applied stack, and the next promotion, a rollback and an auditor saw no trace of it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from promotion_fixtures import (
    RecordingDeployer,
    alive,
    build_record,
    deploying,
    evidence_of,
    write_json,
)

from localservers import stop_group
from promotion import interrupted
from promotion import promote as ops
from promotion import rollback as rollback_ops
from promotion.config import load_config
from promotion.evidence import read_bytes
from promotion.lock import lock_uri
from promotion.record import validate_record
from promotion.registry import Registry
from promotion.store import ModelStore

CFG = load_config()
NEXT_DIGEST = "sha256:" + "5" * 64


def _records(store: Path, decision: str) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in sorted((store / "sentiment" / "records").glob("*.json"))]
    return [r for r in found if r["decision"] == decision]


def test_sigterm_during_the_deploy_is_recorded_and_the_environment_stays_usable(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    """A champion, then through the real CLI a candidate (another serving image) whose `pulumi up` is SIGTERMed: the
    store then names both images and the step, and the next promotion and a rollback work as before."""
    store = ModelStore(str(tmp_path / "store"), "sentiment")
    registry = Registry(f"sqlite:///{store.root}/mlflow.db")  # the CLI's registry (promotion_cli)
    champion = ops.promote(
        evidence_of(evidence_files), CFG, "dev", store=store, registry=registry, deployer=RecordingDeployer()
    )
    served = champion.record["lineage"]["serving_image"]
    build = build_record()
    build["images"]["serving"]["digest"] = NEXT_DIGEST
    files = {**evidence_files, "build_record": write_json(tmp_path / "build-record-next.json", build)}

    holder = deploying(files, tmp_path / "store", tmp_path / "deploy.pid")
    deploy_pid = int((tmp_path / "deploy.pid").read_text())
    try:
        os.kill(holder.pid, signal.SIGTERM)  # the promotion only, as the runner or the kubelet sends it
        _, err = holder.communicate(timeout=60)
    finally:
        stop_group(holder, grace_s=1)
        if alive(deploy_pid):
            os.kill(deploy_pid, signal.SIGKILL)
    assert holder.returncode == -signal.SIGTERM, err  # ends as before: 143 in a shell

    [record] = _records(tmp_path / "store", "deploy_interrupted")
    validate_record(record)
    candidate = record["lineage"]["serving_image"]
    assert candidate.endswith(NEXT_DIGEST) and served != candidate
    assert record["deployment"] == {
        "status": "interrupted",
        "image": candidate,
        "served_before": served,
        "stopped_during": "up",
        "signal": "SIGTERM",
        "deploy_error": None,
    }
    assert record["deployable"] is False and record["model"]["alias"] is None
    assert "pulumi stack --stack dev" in record["reasons"][0] and "pulumi refresh" in record["reasons"][0]
    card = read_bytes(store.record_uri(record["record_id"], "md")).decode()
    assert "deploy_interrupted" in card and "stopped during: up" in card
    assert record["record_id"] in err, err
    # The candidate was never confirmed live: the history and the alias still name the champion.
    assert [e["version"] for e in store.events("dev")] == ["1"]
    assert registry.alias_version(store.model, "dev") == "1"
    assert read_bytes(lock_uri(store.root, store.model, "dev")) is None

    # Not refused: the next promotion is judged against the same champion and deploys anew...
    redone = ops.promote(
        evidence_of(files), CFG, "dev", store=store, registry=registry, deployer=RecordingDeployer()
    )
    assert redone.record["decision"] == "promote" and redone.record["lineage"]["champion"]["version"] == "1"
    # ...and a rollback from it restores the image served before the interruption.
    back = rollback_ops.rollback("dev", store=store, registry=registry, reason="test")
    assert back.deploy is not None and back.deploy["serving_image"] == served
    assert registry.alias_version(store.model, "dev") == "1"


class Stopped(RecordingDeployer):
    """Ctrl-C arrives while `at` runs (after the steps before it succeeded or failed as `fail` says)."""

    def __init__(self, at: str, fail: str | None = None) -> None:
        super().__init__(fail=fail)
        self.at = at

    def _step(self, step: str, image: str | None) -> None:
        if step == self.at:
            raise KeyboardInterrupt
        super()._step(step, image)


@pytest.mark.parametrize(
    ("deployer", "during", "error"),
    [
        (Stopped("smoke"), "smoke", None),
        (Stopped("rollback", fail="smoke"), "rollback", "smoke failed (test)"),
    ],
    ids=["smoke", "rollback"],
)
def test_ctrl_c_during_the_smoke_check_or_the_rollback_is_recorded(
    deployer: Stopped,
    during: str,
    error: str | None,
    evidence_files: dict[str, Path],
    tmp_path: Path,
    registry: Registry,
) -> None:
    store = ModelStore(str(tmp_path / "store"), f"m-interrupted-{during}")
    with pytest.raises(KeyboardInterrupt):
        ops.promote(
            evidence_of(evidence_files), CFG, "dev", store=store, registry=registry, deployer=deployer
        )
    [path] = (tmp_path / "store" / store.model / "records").glob("*.json")
    record = json.loads(path.read_text())
    validate_record(record)
    assert record["decision"] == "deploy_interrupted"
    assert record["deployment"]["stopped_during"] == during and record["deployment"]["signal"] == "SIGINT"
    assert record["deployment"]["deploy_error"] == error and record["deployment"]["served_before"] is None
    assert store.events("dev") == [] and registry.alias_version(store.model, "dev") is None
    assert read_bytes(lock_uri(store.root, store.model, "dev")) is None


class HangingStore(ModelStore):
    """An object store behind a partition: a write that does not come back."""

    released = threading.Event()

    def write_record(self, record: dict[str, Any], card_markdown: str) -> str:
        self.released.wait(60)
        raise OSError("the store did not answer")


def test_a_store_that_hangs_cannot_hold_the_interrupted_promotion(
    evidence_files: dict[str, Path],
    tmp_path: Path,
    registry: Registry,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The record's write is bounded (a pod's termination grace is 30 s): the promotion still ends, its lock goes,
    and the log keeps what the record would have said."""
    monkeypatch.setattr(interrupted, "WRITE_TIMEOUT_S", 0.5)
    store = HangingStore(str(tmp_path / "store"), "m-interrupted-hang")
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            ops.promote(
                evidence_of(evidence_files),
                CFG,
                "dev",
                store=store,
                registry=registry,
                deployer=Stopped("up"),
            )
        assert time.monotonic() - t0 < 20
    finally:
        HangingStore.released.set()
    err = capsys.readouterr().err
    assert (
        "could not be written" in err
        and "did not finish in 0.5 s" in err
        and "stopped by SIGINT during up" in err
    )
    assert read_bytes(lock_uri(store.root, store.model, "dev")) is None
