"""Records: schema, lineage, model card; promote moves the MLflow alias; rollback restores the previous version."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from promotion_fixtures import (
    DIGEST_S,
    DIGEST_T,
    MANIFEST_SHA,
    RecordingDeployer,
    evidence_of,
    loadtest,
    make_candidate,
    policy_report,
    write_json,
)

from promotion import promote as ops
from promotion import rollback as rollback_ops
from promotion import store as store_module
from promotion.__main__ import main
from promotion.config import load_config
from promotion.errors import PromotionError
from promotion.evidence import load_evidence, sha256
from promotion.record import validate_record
from promotion.registry import Registry
from promotion.store import ModelStore

CFG = load_config()
OK = RecordingDeployer()


def test_record_schema_and_lineage(evidence_files: dict[str, Path], tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "store"), "m-schema")
    record = ops.evaluate(evidence_of(evidence_files), CFG, "dev", store=store, requested_by="alice")
    validate_record(record)
    assert record["decision"] == "promote" and record["deployable"] is True
    lineage = record["lineage"]
    assert lineage["dataset_manifest_sha256"] == MANIFEST_SHA
    assert lineage["code_revision"] == "0123456789abcdef0123456789abcdef01234567"
    assert lineage["training_image"] == f"ghcr.io/acme/eu-ml-training@{DIGEST_T}"
    assert lineage["serving_image"] == f"ghcr.io/acme/eu-ml-serving@{DIGEST_S}"  # tag dropped, digest kept
    assert lineage["policy_report_sha256"] == sha256(evidence_files["policy_report"].read_bytes())
    assert lineage["loadtest_sha256"] == sha256(evidence_files["loadtest"].read_bytes())
    assert lineage["cost"] == {"instance_type": "local-cpu", "hours": 0.05, "usd": 0.0}
    assert lineage["metrics"]["test"]["accuracy"] == 0.88 and lineage["requested_by"] == "alice"
    assert {g["name"] for g in record["gates"]} >= {
        "beats-baseline", "not-worse-than-champion", "onnx-parity", "latency-slo", "loadtest-errors",
        "policy-clean", "images-pinned", "approval",
    }  # fmt: skip
    assert record["thresholds"]["environment"]["slo_p99_ms"] == CFG.environment("dev").slo_p99_ms
    assert "intended_use" in record["model_card"] and record["model_card"]["ai_act"]["risk_classification"]
    broken = dict(record)
    del broken["lineage"]
    with pytest.raises(jsonschema.ValidationError):
        validate_record(broken)


def test_rejection_is_recorded_with_reasons(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry
) -> None:
    store = ModelStore(str(tmp_path / "store"), "m-reject")
    slow = json.loads(evidence_files["loadtest"].read_text())
    slow["results"][0]["errors"] = 3
    write_json(evidence_files["loadtest"], slow)
    outcome = ops.promote(evidence_of(evidence_files), CFG, "dev", store=store, registry=registry)
    assert outcome.record["decision"] == "reject" and outcome.deploy is None
    assert any(r.startswith("loadtest-errors: 3 failed") for r in outcome.record["reasons"])
    saved = json.loads(Path(outcome.record_uri).read_text())
    assert saved == outcome.record and saved["model"]["version"] is None
    assert "# Model card" in Path(outcome.record_uri).with_suffix(".md").read_text()
    assert registry.alias_version("m-reject", "dev") is None and store.deployed("dev") == []


def test_promote_champion_and_rollback(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry
) -> None:
    store = ModelStore(str(tmp_path / "store"), "m-roll")
    first = ops.promote(evidence_of(evidence_files), CFG, "dev", store=store, registry=registry, deployer=OK)
    assert first.record["model"]["version"] == "1" and registry.alias_version("m-roll", "dev") == "1"
    assert first.deploy["serving_image"].endswith(DIGEST_S)
    assert registry.version_tags("m-roll", "1")["record_id"] == first.record["record_id"]

    better = make_candidate(tmp_path / "run2", accuracy=0.89)
    second = ops.promote(
        evidence_of(evidence_files, better), CFG, "dev", store=store, registry=registry, deployer=OK
    )
    champion_gate = next(g for g in second.record["gates"] if g["name"] == "not-worse-than-champion")
    assert champion_gate["status"] == "pass" and champion_gate["measured"] == pytest.approx(0.01)
    assert second.record["lineage"]["champion"] == {"version": "1", "record_id": first.record["record_id"]}
    assert registry.alias_version("m-roll", "dev") == "2"

    # A worse candidate is rejected against the champion (version 2 at 0.89).
    worse = make_candidate(tmp_path / "run3", accuracy=0.87)
    third = ops.promote(
        evidence_of(evidence_files, worse), CFG, "dev", store=store, registry=registry, deployer=OK
    )
    assert third.record["decision"] == "reject" and registry.alias_version("m-roll", "dev") == "2"

    back = rollback_ops.rollback(
        "dev", store=store, registry=registry, reason="p99 regression", requested_by="oncall"
    )
    assert registry.alias_version("m-roll", "dev") == "1"
    assert back.record["action"] == "rollback" and back.record["model"]["version"] == "1"
    assert back.record["lineage"]["rolled_back_from"] == {
        "version": "2",
        "record_id": second.record["record_id"],
    }
    assert (
        back.deploy["model_version"] == "1" and back.deploy["serving_image"] == first.deploy["serving_image"]
    )
    validate_record(back.record)
    assert [d.version for d in store.deployed("dev")] == ["1"]
    with pytest.raises(PromotionError, match="nothing to roll back to"):
        rollback_ops.rollback("dev", store=store, registry=registry, reason="again")


def test_prod_needs_a_distinct_approver(evidence_files: dict[str, Path], tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "store"), "m-prod")
    write_json(
        evidence_files["policy_report"],
        json.loads(evidence_files["policy_report"].read_text()) | {"stack": "prod"},
    )
    approval = write_json(
        tmp_path / "approval.json",
        {"approver": "bob", "approved_at": "2026-12-02T10:00:00Z", "environment": "prod"},
    )
    record = ops.evaluate(evidence_of(evidence_files), CFG, "prod", store=store, requested_by="alice")
    assert record["decision"] == "reject" and any(r.startswith("approval:") for r in record["reasons"])
    ok = ops.evaluate(
        evidence_of(evidence_files, approval=str(approval)), CFG, "prod", store=store, requested_by="alice"
    )
    gate = next(g for g in ok["gates"] if g["name"] == "approval")
    assert gate["status"] == "pass" and ok["lineage"]["approver"] == "bob"
    with pytest.raises(PromotionError, match="not allowed for prod"):
        ops.evaluate(evidence_of(evidence_files), CFG, "prod", store=store, local_run=True)


def test_local_run_is_not_deployable(evidence_files: dict[str, Path], tmp_path: Path) -> None:
    store = ModelStore(str(tmp_path / "store"), "m-local")
    evidence = load_evidence(
        str(evidence_files["candidate"]),
        loadtest=str(evidence_files["loadtest"]),
        policy_report=str(evidence_files["policy_report"]),
        build_record=str(tmp_path / "no-build-record.json"),
    )
    record = ops.evaluate(evidence, CFG, "dev", store=store, local_run=True)
    assert record["decision"] == "promote" and record["deployable"] is False
    assert record["lineage"]["serving_image"] is None
    assert any(r.startswith("images-pinned not applicable: local run") for r in record["reasons"])
    strict = ops.evaluate(evidence, CFG, "dev", store=store, local_run=False)
    assert strict["decision"] == "reject"


def test_cli_exit_codes(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry, capsys, monkeypatch
) -> None:
    common = ["--store", str(tmp_path / "store"), "--model-name", "m-cli", "--registry-uri", registry.uri]
    evidence = [
        "--candidate", str(evidence_files["candidate"]), "--loadtest", str(evidence_files["loadtest"]),
        "--policy-report", str(evidence_files["policy_report"]), "--build-record", str(evidence_files["build_record"]),
    ]  # fmt: skip
    deploy = tmp_path / "deploy.json"
    # A deployable promotion without its deploy and smoke steps is refused (exit 2, alias unmoved).
    assert main(["promote", "--env", "dev", *common, *evidence]) == 2
    steps = ["--deploy-command", "true", "--smoke-command", "true"]
    assert main(["promote", "--env", "dev", *common, *evidence, *steps, "--deploy-out", str(deploy)]) == 0
    assert json.loads(deploy.read_text())["model_version"] == "1"
    assert "PASS  beats-baseline" in capsys.readouterr().out
    # `history` reads the history file once: what it says is served follows from the events it printed,
    # even while a promotion appends to the file between two reads.
    reads: list[str] = []
    real_read = store_module.read_bytes
    monkeypatch.setattr(store_module, "read_bytes", lambda uri: reads.append(uri) or real_read(uri))
    assert main(["history", "--env", "dev", *common]) == 0
    assert "dev serves: 1" in capsys.readouterr().out
    assert [u for u in reads if u.endswith("environments/dev.json")] == [
        str(tmp_path / "store" / "m-cli" / "environments" / "dev.json")
    ]
    monkeypatch.undo()
    assert main(["evaluate", "--env", "prod", *common, *evidence]) == 1  # no approval, wrong stack report
    assert main(["rollback", "--env", "dev", *common, "--reason", "x"]) == 2  # only one version
    assert main(["evaluate", "--env", "dev", *common, "--candidate", str(tmp_path / "nowhere")]) == 2
    assert "metrics.json" in capsys.readouterr().err


@pytest.mark.integration
def test_records_in_a_bucket(evidence_files: dict[str, Path], s3_env: str, tmp_path: Path) -> None:
    """The store can be a bucket (moto's S3 server over HTTP): records land beside the model there."""
    import boto3

    boto3.client("s3").create_bucket(
        Bucket="models", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"}
    )
    store = ModelStore("s3://models/store", "m-s3")
    record = ops.evaluate(evidence_of(evidence_files), CFG, "dev", store=store)
    uri = store.write_record(record, "# card\n")
    assert uri.startswith("s3://models/store/m-s3/records/")
    assert store.read_record(record["record_id"]) == record
    store.append_event("dev", {"action": "promote", "version": "1", "record_id": record["record_id"]})
    assert [d.version for d in store.deployed("dev")] == ["1"]
    with pytest.raises(PromotionError, match="immutable"):
        store.write_record(record, "")


def _strict_json(text: str) -> object:
    """RFC 8259 JSON: no NaN or Infinity, which Python writes by default and jq, JavaScript and JSON Schema
    tools refuse."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_diverged_run_is_rejected_in_a_record_that_stays_json(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry, capsys
) -> None:
    diverged = make_candidate(tmp_path / "diverged")
    metrics = json.loads((diverged / "metrics.json").read_text())
    metrics["test"]["accuracy"], metrics["validation"]["f1"] = float("nan"), float("inf")
    (diverged / "metrics.json").write_text(json.dumps(metrics))  # as Python writes it: NaN, Infinity
    out, store = tmp_path / "record.json", tmp_path / "store"
    argv = [
        "promote", "--env", "dev", "--store", str(store), "--model-name", "m-nan", "--registry-uri", registry.uri,
        "--candidate", str(diverged), "--loadtest", str(evidence_files["loadtest"]),
        "--policy-report", str(evidence_files["policy_report"]), "--build-record", str(evidence_files["build_record"]),
        "--out", str(out),
    ]  # fmt: skip
    assert main(argv) == 1
    assert "NaN/inf" in capsys.readouterr().out
    record = _strict_json(out.read_text())
    assert isinstance(record, dict) and record["decision"] == "reject"
    (stored,) = (store / "m-nan" / "records").glob("*.json")  # promote keeps the rejection in the store too
    assert _strict_json(stored.read_text()) == record
    assert record["lineage"]["metrics"]["test"]["accuracy"] is None
    assert record["lineage"]["metrics"]["validation"]["f1"] is None
    validate_record(record)


# --- a rollback that cannot be completed as asked is refused before anything moves (exit 2, store and registry as
# they were): dev's history here holds two local-run promotions, registered in the module's sqlite registry.
LOCAL_MODEL = "m-rollback-refusals"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def local_runs(tmp_path_factory: pytest.TempPathFactory, registry: Registry) -> Path:
    root = tmp_path_factory.mktemp("rollback-refusals")
    evidence = ["--loadtest", str(write_json(root / "loadtest.json", loadtest())),
                "--policy-report", str(write_json(root / "policy" / "dev.json", policy_report("dev")))]  # fmt: skip
    for n, accuracy in enumerate((0.88, 0.885)):
        candidate = make_candidate(root / f"run{n}", accuracy=accuracy)
        args = ["promote", "--env", "dev", "--store", str(root / "store"), "--model-name", LOCAL_MODEL,
                "--registry-uri", registry.uri, "--candidate", str(candidate), *evidence, "--no-images", "--local-run"]  # fmt: skip
        assert main(args) == 0
    return root / "store"


def snapshot(store: Path, registry: Registry) -> tuple[dict[str, bytes], str | None]:
    files = {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}
    return files, registry.alias_version(LOCAL_MODEL, "dev")


def rollback(store: Path, registry_uri: str, *extra: str) -> int:
    return main(["rollback", "--env", "dev", "--store", str(store), "--model-name", LOCAL_MODEL,
                 "--registry-uri", registry_uri, "--reason", "p99", *extra])  # fmt: skip


def test_a_rollback_to_a_version_without_image_is_refused_with_stack_config(
    local_runs: Path, registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the rollback was recorded, the alias and history moved, then `--stack-config` failed with exit 2
    ("no deployable serving image digest"): read as "nothing happened", a retry rolled back one version further."""
    stack_file = tmp_path / "Pulumi.dev.yaml"
    shutil.copy(ROOT / "Pulumi.dev.yaml", stack_file)
    store = local_runs
    before = snapshot(store, registry)
    assert rollback(store, registry.uri, "--stack-config", str(stack_file)) == 2
    err = capsys.readouterr().err
    assert (
        "--stack-config: dev would go back to version 1" in err and "a local run with no serving image" in err
    )
    assert "Nothing was changed" in err
    assert snapshot(store, registry) == before
    assert stack_file.read_text() == (ROOT / "Pulumi.dev.yaml").read_text()


def test_a_rollback_in_a_registry_that_does_not_exist_says_so_and_creates_none(
    local_runs: Path, registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the wrong --registry-uri got a new, empty sqlite registry (the read created it), and the rollback
    said version 1 "no longer exists in the registry (deleted)": promote it anew."""
    missing = tmp_path / "elsewhere" / "mlflow.db"
    store = local_runs
    before = snapshot(store, registry)
    assert rollback(store, f"sqlite:///{missing}") == 2
    err = capsys.readouterr().err
    assert f"model registry sqlite:///{missing} does not exist yet" in err
    assert f"give --registry-uri {registry.uri}" in err and "deleted" not in err
    assert not missing.parent.exists()
    assert snapshot(store, registry) == before


def test_a_rollback_whose_own_registry_file_is_gone_says_to_restore_it(
    local_runs: Path, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    """The registry the records name, its sqlite file deleted: the message told the user to give the very
    --registry-uri they had given."""
    db = Path(registry.uri.removeprefix("sqlite:///"))
    aside = db.with_name(db.name + ".aside")
    db.rename(aside)
    try:
        assert rollback(local_runs, registry.uri) == 2
    finally:
        aside.rename(db)
    err = capsys.readouterr().err
    assert "restore its file or database from a backup" in err and "give --registry-uri" not in err
