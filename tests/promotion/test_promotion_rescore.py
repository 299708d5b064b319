"""`not-worse-than-champion` compares like with like: when the candidate's data differ from the champion's, it uses the
champion's score on the candidate's test rows (metrics.json `champion_rescored`, promotion/rescore.py) made for THIS
champion and THIS data, and fails (with the command that makes it) when there is none. It used to compare the
candidate's test metric with the champion's recorded one, measured on another test set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from promotion_fixtures import MANIFEST_SHA, evidence_of, make_candidate

from promotion import promote as ops
from promotion.__main__ import main
from promotion.config import load_config
from promotion.store import ModelStore
from tests.pipeline.test_pipeline_champion_rescore import (  # the real champion bundle and data of that module
    candidate_on_b,
    store_with_champion,
    world,  # noqa: F401 - a fixture
)

CFG = load_config()
OTHER_SHA = "b" * 64
CHAMPION = "20261201T000000Z-dev-promote-champion"


def champion_store(root: Path, *, manifest: str = MANIFEST_SHA, accuracy: float = 0.80) -> ModelStore:
    model = root / "sentiment"
    (model / "records").mkdir(parents=True)
    (model / "environments").mkdir()
    record = {
        "record_id": CHAMPION, "created": "2026-12-01T00:00:00Z",
        "model": {"name": "sentiment", "version": "3", "source": str(root / "champion" / "export")},
        "lineage": {"dataset_manifest_sha256": manifest, "bundle_metadata_sha256": "c" * 64,
                    "metrics": {"test": {"accuracy": accuracy, "f1": accuracy, "auc": accuracy}}},
    }  # fmt: skip
    (model / "records" / f"{CHAMPION}.json").write_text(json.dumps(record))
    event = {"action": "promote", "version": "3", "record_id": CHAMPION, "serving_image": None}
    (model / "environments" / "dev.json").write_text(json.dumps({"environment": "dev", "events": [event]}))
    return ModelStore(str(root), "sentiment")


def on_new_data(folder: Path, rescored: dict[str, Any] | None = None, accuracy: float = 0.88) -> Path:
    """A candidate trained on other data than the champion (another manifest), optionally carrying a rescoring."""
    make_candidate(folder, accuracy=accuracy)
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["dataset_manifest_sha256"] = OTHER_SHA
    if rescored is not None:
        metrics["champion_rescored"] = rescored
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def rescoring(**changes: Any) -> dict[str, Any]:
    doc = {
        "champion": {"record_id": CHAMPION, "version": "3"}, "manifest_sha256": OTHER_SHA,
        "bundle_metadata_sha256": "c" * 64, "rows": 2000, "split": "test",
        "metrics": {"accuracy": 0.90, "f1": 0.90, "auc": 0.95},
    }  # fmt: skip
    return {**doc, **changes}


def judged(evidence_files: dict[str, Path], candidate: Path, store: ModelStore) -> dict[str, Any]:
    record = ops.evaluate(evidence_of(evidence_files, candidate), CFG, "dev", store=store)
    return next(g for g in record["gates"] if g["name"] == "not-worse-than-champion")


def test_different_data_without_a_rescoring_fails_closed_with_the_fix(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    store = champion_store(tmp_path / "store")
    candidate = on_new_data(tmp_path / "run2")
    gate = judged(evidence_files, candidate, store)
    # It used to pass: 0.88 against the champion's 0.80, recorded on another test set.
    assert gate["status"] == "fail", gate
    assert "different test rows" in gate["detail"] and "no rescoring" in gate["detail"]
    assert f"python -m promotion rescore --env dev --candidate {candidate}" in gate["detail"]


def test_the_gate_uses_a_rescoring_of_this_champion_only(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    store = champion_store(tmp_path / "store")
    # The champion on the candidate's rows: 0.90, so the candidate's 0.88 loses (it beat the recorded 0.80).
    gate = judged(evidence_files, on_new_data(tmp_path / "same", rescoring()), store)
    assert gate["status"] == "fail" and gate["measured"] == pytest.approx(-0.02), gate
    assert "rescored on the candidate's 2000 test rows" in gate["detail"]
    gate = judged(evidence_files, on_new_data(tmp_path / "wins", rescoring(), accuracy=0.91), store)
    assert gate["status"] == "pass" and gate["measured"] == pytest.approx(0.01), gate

    for name, other, why in (
        ("data", rescoring(manifest_sha256="d" * 64), "not the candidate's"),
        ("bundle", rescoring(bundle_metadata_sha256="e" * 64), "a bundle other than the champion's"),
    ):
        gate = judged(evidence_files, on_new_data(tmp_path / name, other, accuracy=0.99), store)
        assert gate["status"] == "fail" and why in gate["detail"], (name, gate)
    # Made against the same model promoted elsewhere (dev's record of it, the candidate promoted on to staging):
    # the same bundle on the same rows is the same score, whichever record names it.
    elsewhere = rescoring(champion={"record_id": "20261101T000000Z-dev-promote-same-bundle"})
    gate = judged(evidence_files, on_new_data(tmp_path / "elsewhere", elsewhere, accuracy=0.91), store)
    assert gate["status"] == "pass" and gate["measured"] == pytest.approx(0.01), gate


def test_same_data_compares_the_recorded_metric_and_ignores_a_stray_rescoring(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    store = champion_store(tmp_path / "store", manifest=OTHER_SHA)
    gate = judged(
        evidence_files, on_new_data(tmp_path / "run2", rescoring(metrics={"accuracy": 0.99})), store
    )
    assert gate["status"] == "pass" and gate["measured"] == pytest.approx(0.08), gate


def test_rescore_command_writes_the_candidates_rescoring_and_fails_clearly(
    tmp_path: Path,
    world: dict[str, Any],  # noqa: F811 - the fixture imported above
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = store_with_champion(
        tmp_path / "store", world, manifest=world["a"].manifest["sha256"], source=str(world["bundle"])
    )
    candidate = candidate_on_b(tmp_path / "candidate", world)
    argv = ["rescore", "--env", "dev", "--candidate", str(candidate), "--store", str(store)]
    assert main(argv) == 0, capsys.readouterr().err
    rescored = json.loads((candidate / "metrics.json").read_text())["champion_rescored"]
    assert rescored["champion"]["record_id"] == "20261201T000000Z-dev-promote-champion"
    assert rescored["rows"] == world["b"].manifest["splits"]["test"]["rows"]
    assert "on the candidate's" in capsys.readouterr().out

    # The champion's bundle gone: exit 2 naming it, the candidate's metrics.json as it was.
    gone = store_with_champion(
        tmp_path / "gone", world, manifest=world["a"].manifest["sha256"], source=str(tmp_path / "nowhere")
    )
    fresh = candidate_on_b(tmp_path / "fresh", world)
    before = (fresh / "metrics.json").read_bytes()
    assert main(["rescore", "--env", "dev", "--candidate", str(fresh), "--store", str(gone)]) == 2
    assert f"bundle {tmp_path / 'nowhere'}" in capsys.readouterr().err
    assert (fresh / "metrics.json").read_bytes() == before
