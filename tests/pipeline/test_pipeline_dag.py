"""The retraining DAG's conditions, through the real local runner and the real steps (subprocesses).

Real: data-check (the smoke preset's dataset manifest), decide-retrain, train (`python -m training train
--preset smoke`), evaluate (promotion's own gates), export (`python -m training export`), promote
(`python -m promotion promote --local-run`). Fakes, and why:
- drift-check writes a DIR/drift.json fixture (the `drift_detected` field of `python -m monitoring drift`'s
  documented output): the tests choose drift or no drift instead of crafting inference windows.
The `images` step is real too: locally (`--local true`) it resolves nothing and lets promotion run without
images; against a real registry: tests/pipeline/test_pipeline_images.py.
The champion in the promotion store is a fixture record in the store's documented layout.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
from pathlib import Path

import pytest

from pipeline import dag, runner

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("pipeline")
    mp = pytest.MonkeyPatch()
    mp.setenv("TRAINING_CACHE_DIR", str(base / "cache"))
    mp.setenv("TRAINING_MLFLOW", "0")
    mp.setenv("MLFLOW_REGISTRY_URI", f"sqlite:///{base / 'registry.db'}")
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    from training import data, presets

    manifest = data.load(presets.smoke().data).manifest["sha256"]
    loadtest = base / "loadtest.json"
    loadtest.write_text(
        json.dumps(
            {
                "results": [
                    {
                        "concurrency": 1,
                        "requests": 50,
                        "rps": 40.0,
                        "p50_ms": 10.0,
                        "p95_ms": 15.0,
                        "p99_ms": 20.0,
                        "errors": 0,
                    }
                ]
            }
        )
    )
    yield {"base": base, "manifest": manifest, "loadtest": loadtest}  # type: ignore[misc]
    mp.undo()


def champion(store: Path, *, accuracy: float, manifest: str) -> None:
    """A model live in dev (promotion/README.md, "Records and the store")."""
    model = store / "sentiment"
    (model / "records").mkdir(parents=True)
    (model / "environments").mkdir(parents=True)
    record = {
        "record_id": "champion-fixture",
        "created": dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"),
        "lineage": {
            "dataset_manifest_sha256": manifest,
            "metrics": {"test": {"accuracy": accuracy, "f1": accuracy, "auc": accuracy}},
        },
    }
    (model / "records" / "champion-fixture.json").write_text(json.dumps(record))
    event = {"action": "promote", "version": "1", "record_id": "champion-fixture", "serving_image": None}
    (model / "environments" / "dev.json").write_text(json.dumps({"environment": "dev", "events": [event]}))


def fakes(work: Path, drift: bool) -> dict[str, list[str]]:
    doc = {"drift_detected": drift, "score": 0.6 if drift else 0.1, "threshold": 0.5}
    write = f"import json,pathlib; p=pathlib.Path({str(work / 'drift')!r}); p.mkdir(parents=True, exist_ok=True); "
    write += f"(p/'drift.json').write_text(json.dumps({doc!r}))"
    return {"drift-check": [sys.executable, "-c", write]}


def run(env: dict, name: str, *, drift: bool, champion_accuracy: float, work: Path | None = None) -> dict:
    store = env["base"] / name / "store"
    champion(store, accuracy=champion_accuracy, manifest=env["manifest"])
    work = work or env["base"] / name / "work"
    params = dag.Params(
        preset="smoke",
        store=str(store),
        work=str(work),
        # Drift-check is faked; a promotion writes the promoted run's reference records here (it wrote them into
        # the repository's root, as ./unused-by-the-fake/, whenever the smoke candidate won).
        reference=str(env["base"] / name / "reference") + "/",
        current="unused-by-the-fake",
        loadtest=str(env["loadtest"]),
    )
    lines: list[str] = []
    record = runner.run(params, commands=fakes(work, drift), echo=lines.append)
    record["_lines"] = lines
    return record


def statuses(record: dict) -> dict[str, str]:
    return {s["step"]: s["status"] for s in record["steps"]}


def test_no_drift_same_data_fresh_champion_means_no_training(env: dict) -> None:
    record = run(env, "calm", drift=False, champion_accuracy=0.80)
    status = statuses(record)
    assert status["data-check"] == status["drift-check"] == status["decide-retrain"] == "succeeded"
    assert {status[s] for s in ("train", "evaluate", "export", "images", "promote")} == {"skipped"}
    assert record["outcome"] == "no retraining needed"
    retrain = record["conditions"][0]
    assert retrain["step"] == "decide-retrain" and retrain["value"] is False
    assert any("SKIP train: condition of decide-retrain is false" in line for line in record["_lines"])
    # The record lies beside the promotion records, and says what it saw.
    stored = json.loads(Path(record["record_uri"]).read_text())
    assert Path(record["record_uri"]).parent.name == "pipeline-runs"
    assert Path(record["record_uri"]).parent.parent.joinpath("records").is_dir()
    assert stored["inputs"]["preset"] == "smoke" and stored["outcome"] == record["outcome"]
    # The stored record says where it lives, as documented.
    assert stored["record_uri"] == record["record_uri"]


@pytest.mark.slow
def test_drift_trains_and_a_winning_candidate_goes_to_promotion(env: dict) -> None:
    record = run(env, "drift", drift=True, champion_accuracy=0.50)
    status = statuses(record)
    assert status["train"] == "succeeded", record["_lines"][-30:]
    assert "drift detected" in " ".join(record["conditions"][0]["reasons"])
    evaluate = record["conditions"][1]
    assert evaluate["step"] == "evaluate" and evaluate["value"] is True, evaluate
    assert status["export"] == status["images"] == status["promote"] == "succeeded"
    work = Path(record["inputs"]["work"])
    assert (work / "candidate" / "export" / "metadata.json").is_file()
    # promotion judged it and wrote its record (pass or reject, the record is always written)
    records = [
        p
        for p in (Path(record["inputs"]["store"]) / "sentiment" / "records").glob("*.json")
        if not p.name.endswith(".drift-reference.json")  # the note of a promotion's drift reference
    ]
    assert len(records) == 2, records  # the champion fixture + this decision
    assert record["outcome"] in ("promoted", "promotion rejected by its gates (see the promotion record)")


def test_losing_candidate_is_not_exported_or_promoted(env: dict) -> None:
    drift = env["base"] / "drift" / "work" / "candidate"
    if (drift / "metrics.json").is_file():  # the drift run's WORK is its own: its bundle is what it promoted
        bundle = {f: f.read_bytes() for f in (drift / "export").rglob("*") if f.is_file()}
        with pytest.raises(ValueError, match=r"holds the candidate that run \S+ \(outcome: pro"):
            run(env, "in-the-drift-runs-work", drift=True, champion_accuracy=0.99, work=drift.parent)
        assert {f: f.read_bytes() for f in (drift / "export").rglob("*") if f.is_file()} == bundle
    work = env["base"] / "strong-champion" / "work"
    if (
        drift / "checkpoints"
    ).is_dir():  # to save a training: the trainer resumes the finished one, re-scores it
        shutil.copytree(drift / "checkpoints", work / "candidate" / "checkpoints")
    record = run(env, "strong-champion", drift=True, champion_accuracy=0.99, work=work)
    status = statuses(record)
    assert status["train"] == "succeeded" and status["evaluate"] == "succeeded"
    evaluate = record["conditions"][1]
    assert evaluate["value"] is False
    assert any(g["name"] == "not-worse-than-champion" and g["status"] == "fail" for g in evaluate["gates"])
    assert status["export"] == status["images"] == status["promote"] == "skipped"
    assert record["outcome"] == "candidate lost: not promoted"
    assert len(list((Path(record["inputs"]["store"]) / "sentiment" / "records").glob("*.json"))) == 1


def test_dry_run_prints_the_plan_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.cli import main

    assert main(["run", "--dry-run", "--work", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ")] == [
        s.name for s in dag.STEPS
    ]
    assert not (tmp_path / "w").exists()  # nothing ran
