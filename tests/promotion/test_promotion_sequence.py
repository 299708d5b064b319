"""Promotion order and the environment sequence, read from the promotion records.

gates -> approval -> deploy (`pulumi up`) -> post-deploy smoke -> alias move; a failed deploy or
smoke check rolls the stack back and leaves the alias; staging only from dev, prod only from
staging; prod judged on staging's own load test; the serving image's label names the bundle.
The registry is MLflow's real sqlite registry; the deployer records the calls it gets.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from promotion_fixtures import RecordingDeployer, build_record, loadtest, policy_report, write_json

from promotion import promote as ops
from promotion.config import ConfigError, load_config, parse_config
from promotion.evidence import load_evidence, sha256
from promotion.registry import Registry
from promotion.store import ModelStore

CFG = load_config()


def _evidence(files: dict[str, Path], env: str, *, lt: Path | None = None, approval: Path | None = None):
    report = write_json(files["policy_report"].parent / f"{env}.json", policy_report(env))
    return load_evidence(
        str(files["candidate"]),
        loadtest=str(lt or files["loadtest"]),
        policy_report=str(report),
        build_record=str(files["build_record"]),
        approval=str(approval) if approval else None,
    )


def _gate(record: dict, name: str) -> dict:
    return next(g for g in record["gates"] if g["name"] == name)


def test_staging_refuses_a_candidate_never_deployed_in_dev(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    store = ModelStore(str(tmp_path / "store"), "m-skip")
    record = ops.evaluate(_evidence(evidence_files, "staging"), CFG, "staging", store=store)
    assert record["decision"] == "reject"
    assert _gate(record, "promoted-from")["status"] == "fail"
    assert any("never deployed to dev" in r for r in record["reasons"])


def test_dev_then_staging_then_prod_each_on_the_previous_live_load_test(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry
) -> None:
    store = ModelStore(str(tmp_path / "store"), "m-seq")
    calls: list[str] = []
    dev_live = write_json(tmp_path / "dev-live.json", loadtest() | {"environment": "dev"})
    dev = ops.promote(
        _evidence(evidence_files, "dev"), CFG, "dev", store=store, registry=registry,
        deployer=RecordingDeployer(calls=calls, live_loadtest=dev_live),
    )  # fmt: skip
    assert dev.record["decision"] == "promote"
    image = dev.record["lineage"]["serving_image"]
    assert calls == [f"up {image}", f"smoke {image}"]  # deployed and checked before the alias moved
    assert registry.alias_version("m-seq", "dev") == dev.record["model"]["version"]

    # staging: no --loadtest; dev's live load test is read from the store beside dev's record.
    staging_live = write_json(tmp_path / "staging-live.json", loadtest() | {"environment": "staging"})
    staging_evidence = dataclasses.replace(_evidence(evidence_files, "staging"), loadtest=None)
    staging = ops.promote(
        staging_evidence, CFG, "staging", store=store, registry=registry,
        deployer=RecordingDeployer(live_loadtest=staging_live),
    )  # fmt: skip
    assert staging.record["decision"] == "promote", staging.record["reasons"]
    assert staging.record["lineage"]["loadtest_sha256"] == sha256(dev_live.read_bytes())
    assert _gate(staging.record, "promoted-from")["measured"] == dev.record["record_id"]

    approval = write_json(
        tmp_path / "approval.json",
        {"approver": "bob", "approved_at": "2026-12-02T10:00:00Z", "environment": "prod"},
    )
    # Another load test (here dev's live one) does not judge prod ...
    on_dev = ops.evaluate(
        _evidence(evidence_files, "prod", lt=dev_live, approval=approval), CFG, "prod", store=store,
        requested_by="alice",
    )  # fmt: skip
    assert on_dev["decision"] == "reject" and _gate(on_dev, "loadtest-source")["status"] == "fail"
    # ... staging's own one, run against staging's live deployment, does.
    on_staging = ops.evaluate(
        _evidence(evidence_files, "prod", lt=staging_live, approval=approval), CFG, "prod", store=store,
        requested_by="alice",
    )  # fmt: skip
    assert on_staging["decision"] == "promote", on_staging["reasons"]
    assert _gate(on_staging, "promoted-from")["measured"] == staging.record["record_id"]


@pytest.mark.parametrize("failing", ["up", "smoke"])
def test_failed_deploy_rolls_back_and_leaves_the_alias(
    failing: str, evidence_files: dict[str, Path], tmp_path: Path, registry: Registry
) -> None:
    model = f"m-fail-{failing}"
    store = ModelStore(str(tmp_path / "store"), model)
    first = ops.promote(
        _evidence(evidence_files, "dev"),
        CFG,
        "dev",
        store=store,
        registry=registry,
        deployer=RecordingDeployer(),
    )
    live_version, live_image = first.record["model"]["version"], first.record["lineage"]["serving_image"]
    other = json.loads(evidence_files["build_record"].read_text())
    other["images"]["serving"]["digest"] = "sha256:" + "9" * 64
    write_json(evidence_files["build_record"], other)
    calls: list[str] = []
    failed = ops.promote(
        _evidence(evidence_files, "dev"), CFG, "dev", store=store, registry=registry,
        deployer=RecordingDeployer(fail=failing, calls=calls),
    )  # fmt: skip
    new_image = failed.record["lineage"]["serving_image"]
    assert failed.record["decision"] == "deploy_failed" and failed.deploy is None
    assert calls[-1] == f"rollback {live_image}" and f"up {new_image}" in calls
    assert ("smoke" in " ".join(calls)) is (failing == "smoke")
    assert registry.alias_version(model, "dev") == live_version  # the alias never moved
    assert [d.version for d in store.deployed("dev")] == [live_version]
    assert store.read_record(failed.record["record_id"])["deployment"]["status"] == "rolled_back"


def test_a_failed_rollback_still_writes_the_record_with_both_errors(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry
) -> None:
    store = ModelStore(str(tmp_path / "store"), "m-fail-twice")
    calls: list[str] = []
    failed = ops.promote(
        _evidence(evidence_files, "dev"), CFG, "dev", store=store, registry=registry,
        deployer=RecordingDeployer(fail=("up", "rollback"), calls=calls),
    )  # fmt: skip
    assert [c.split()[0] for c in calls] == ["up", "rollback"]
    saved = store.read_record(failed.record["record_id"])  # was: no record at all, the error escaped
    assert saved["decision"] == "deploy_failed" and saved["deployment"]["status"] == "rollback_failed"
    assert "up failed (test)" in saved["reasons"][0] and "rollback failed (test)" in saved["reasons"][0]
    assert saved["model"]["alias"] is None and registry.alias_version("m-fail-twice", "dev") is None


def test_a_local_run_in_dev_does_not_open_staging(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry
) -> None:
    store = ModelStore(str(tmp_path / "store"), "m-localrun")
    local = load_evidence(
        str(evidence_files["candidate"]),
        loadtest=str(evidence_files["loadtest"]),
        policy_report=str(evidence_files["policy_report"]),
        build_record=str(tmp_path / "none.json"),
    )
    assert (
        ops.promote(local, CFG, "dev", store=store, registry=registry, local_run=True).record["deployable"]
        is False
    )
    staging = ops.evaluate(_evidence(evidence_files, "staging"), CFG, "staging", store=store)
    assert _gate(staging, "promoted-from")["status"] == "fail"
    assert _gate(staging, "loadtest-source")["status"] == "fail"  # no live load test from dev


def test_serving_image_label_must_name_this_bundle(evidence_files: dict[str, Path], tmp_path: Path) -> None:
    record = build_record()
    record["images"]["serving"]["labels"]["eu.ml-platform.bundle.metadata-sha256"] = "f" * 64
    write_json(evidence_files["build_record"], record)
    result = ops.evaluate(_evidence(evidence_files, "dev"), CFG, "dev", store=ModelStore(str(tmp_path), "m"))
    assert result["decision"] == "reject" and _gate(result, "image-carries-bundle")["status"] == "fail"


def test_sequence_config_names_known_environments() -> None:
    raw = {"environments": {"dev": {"stack": "dev", "slo_p99_ms": 1.0, "promote_from": "qa"}}}
    with pytest.raises(ConfigError, match="promote_from='qa'"):
        parse_config(raw)
    assert CFG.environment("staging").promote_from == "dev" == CFG.environment("staging").loadtest_from
    assert (
        CFG.environment("prod").promote_from == "staging"
        and CFG.environment("prod").loadtest_from == "staging"
    )


def test_a_long_history_is_read_once_per_evaluation(
    evidence_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A year of dev promotions of other bundles: staging's sequence gates (promoted-from, loadtest-source and the
    recorded load test) each walked dev's whole stack of records, reading every record three times."""
    from collections import Counter

    from promotion import store as store_module

    store = ModelStore(str(tmp_path / "store"), "m-long")
    for i in range(12):
        record = {
            "record_id": f"r{i:03d}",
            "lineage": {"bundle_metadata_sha256": f"other-{i}"},
            "deployable": True,
        }
        store.write_record(record, "card")
        store.append_event("dev", {"action": "promote", "version": str(i), "record_id": record["record_id"]})
    reads: Counter[str] = Counter()
    real = store_module.read_bytes

    def counted(uri: str) -> bytes | None:
        reads[uri] += 1
        return real(uri)

    monkeypatch.setattr(store_module, "read_bytes", counted)
    files = dict(evidence_files)
    no_loadtest = load_evidence(
        str(files["candidate"]),
        policy_report=str(write_json(tmp_path / "staging.json", policy_report("staging"))),
        build_record=str(files["build_record"]),
    )
    record = ops.evaluate(no_loadtest, CFG, "staging", store=ModelStore(store.root, store.model))
    assert _gate(record, "promoted-from")["status"] == "fail"
    assert _gate(record, "loadtest-source")["status"] == "fail"
    records = {uri: n for uri, n in reads.items() if "/records/" in uri}
    assert len(records) == 12 and set(records.values()) == {1}, records
