"""A store shared by promotion versions: what an older one wrote keeps working, what a newer one wrote is refused
with the version it needs (exit 2, nothing written), never a traceback and never a misread.

- store_f0825f9/: records and history written by the first promotion code (its README says how). Today's
  `history`, `evaluate` (champion from an old record) and `rollback` read them.
- A record with a higher `format_version` (a newer promotion during a rollout, two CLIs on one store): `evaluate`
  used to judge against its metrics as if they meant the same, and `rollback` to it ended in a jsonschema traceback
  (exit 1, read by the workflows as a gate's no).
- A record with a value the schema here does not know (a newer `deployment.status`): `rollback` to it ended in
  the same traceback.
- A history with a higher `format_version`: it was not read at all, and the stack was replayed without what the
  newer code meant. A history at this format with an event action unknown here (a mistyped `"action"`) is damage:
  it was reported as "written by a newer promotion" (upgrade) instead of asking for a restore.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from promotion_fixtures import RecordingDeployer, evidence_of, policy_report, write_json

from promotion import promote as ops
from promotion.__main__ import main
from promotion.config import load_config
from promotion.evidence import load_evidence
from promotion.registry import Registry
from promotion.store import ModelStore

OLD_STORE = Path(__file__).with_name("store_f0825f9")
OLD_RECORDS = ("20261206T221629Z-dev-promote-f54267af", "20261206T221654Z-dev-promote-be5382bf")


def old_store(tmp_path: Path, registry: Registry | None = None) -> tuple[Path, str]:
    """A copy of the f0825f9 store under a model name of its own; with `registry`, its versions 1 and 2 exist
    there and the dev alias is on 2, as the old promotions left them."""
    model = f"old-{uuid.uuid4().hex[:8]}"
    store = tmp_path / "store"
    shutil.copytree(OLD_STORE / "sentiment", store / model)
    if registry is not None:
        for record_id in OLD_RECORDS:
            registry.register(model, source=str(tmp_path), tags={"record_id": record_id}, description="")
        registry.set_alias(model, "dev", "2")
    return store, model


def record_path(store: Path, model: str, record_id: str) -> Path:
    return store / model / "records" / f"{record_id}.json"


def edit(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def files(store: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def evaluate_args(evidence_files: dict[str, Path], store: Path, model: str) -> list[str]:
    return [
        "evaluate", "--env", "dev", "--store", str(store), "--model-name", model,
        "--candidate", str(evidence_files["candidate"]), "--loadtest", str(evidence_files["loadtest"]),
        "--policy-report", str(evidence_files["policy_report"]), "--no-images", "--local-run",
    ]  # fmt: skip


def rollback_args(store: Path, model: str, registry: Registry) -> list[str]:
    return [
        "rollback", "--env", "dev", "--reason", "p99", "--store", str(store), "--model-name", model,
        "--registry-uri", str(registry.uri),
    ]  # fmt: skip


def test_a_store_the_first_version_wrote_still_reads_and_rolls_back(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    store, model = old_store(tmp_path, registry)
    assert main(["history", "--env", "dev", "--store", str(store), "--model-name", model]) == 0
    assert capsys.readouterr().out.endswith("dev serves: 2\n")
    assert main(evaluate_args(evidence_files, store, model)) == 1  # 0.88 against the old champion's 0.89
    assert "vs champion 0.8900 in dev" in capsys.readouterr().out

    assert main(rollback_args(store, model, registry)) == 0, capsys.readouterr().err
    assert "rolled back from version 2 to 1" in capsys.readouterr().out
    history = json.loads((store / model / "environments" / "dev.json").read_text())
    old = json.loads((OLD_STORE / "sentiment" / "environments" / "dev.json").read_text())
    assert history["events"][:2] == old["events"] and history["events"][2]["action"] == "rollback"
    assert history["format_version"] == 1
    assert registry.alias_version(model, "dev") == "1"


def test_a_record_of_a_newer_format_is_refused_naming_it(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    store, model = old_store(tmp_path, registry)
    for record_id in OLD_RECORDS:
        edit(record_path(store, model, record_id), lambda r: r.update(format_version=2))
    before = files(store)

    assert (
        main(evaluate_args(evidence_files, store, model)) == 2
    )  # was 1: judged on metrics of a format it cannot read
    err = capsys.readouterr().err
    assert f"{record_path(store, model, OLD_RECORDS[1])} was written by a newer promotion" in err
    assert "format_version 2; this one reads up to 1" in err

    assert main(rollback_args(store, model, registry)) == 2  # was a jsonschema traceback (exit 1)
    assert (
        f"{record_path(store, model, OLD_RECORDS[0])} was written by a newer promotion"
        in capsys.readouterr().err
    )
    assert files(store) == before and registry.alias_version(model, "dev") == "2"


def test_rollback_to_a_record_with_a_value_unknown_here_is_bad_input(
    tmp_path: Path, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    store, model = old_store(tmp_path, registry)
    edit(
        record_path(store, model, OLD_RECORDS[0]),
        lambda r: r.update(deployment={"status": "canary", "image": "r/s@sha256:" + "2" * 64}),
    )
    before = files(store)
    assert main(rollback_args(store, model, registry)) == 2  # was a jsonschema traceback (exit 1)
    err = capsys.readouterr().err
    assert f"its record {record_path(store, model, OLD_RECORDS[0])} does not follow" in err
    assert "at deployment/status: 'canary' is not one of" in err and "Nothing was changed" in err
    assert files(store) == before and registry.alias_version(model, "dev") == "2"


def test_a_history_a_newer_version_wrote_is_refused_not_called_damaged(
    evidence_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, model = old_store(tmp_path)
    history = store / model / "environments" / "dev.json"
    edit(history, lambda h: h.update(format_version=2))
    before = history.read_bytes()
    for args in (
        ["history", "--env", "dev", "--store", str(store), "--model-name", model],
        evaluate_args(evidence_files, store, model),
    ):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"promotion history {history} was written by a newer promotion (format_version 2" in err
        assert "restore it" not in err
    assert history.read_bytes() == before


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda h: h["events"][1].update(action="promte"), "event 2 has action 'promte'"),
        (lambda h: h["events"].append({**h["events"][0], "action": "pin"}), "event 3 has action 'pin'"),
        (lambda h: h.update(format_version="1"), "`format_version` '1' is not a version number"),
    ],
    ids=["mistyped-action", "unknown-action-same-format", "format-not-a-number"],
)
def test_an_unknown_action_at_this_format_is_damage_not_a_newer_promotion(
    change, named: str, evidence_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    """Only a higher `format_version` is a newer promotion's (one that adds an action raises it): a damaged file at
    this version used to be called "written by a newer promotion", sending the user to upgrade instead of restore."""
    store, model = old_store(tmp_path)
    history = store / model / "environments" / "dev.json"
    edit(history, change)
    before = files(store)
    for args in (
        ["history", "--env", "dev", "--store", str(store), "--model-name", model],
        evaluate_args(evidence_files, store, model),
    ):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"promotion history {history}: " in err and named in err
        assert "restore it from the bucket's object versions or a backup" in err
        assert "newer promotion" not in err
    assert files(store) == before


def test_a_deployment_recorded_before_live_load_tests_says_so(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry
) -> None:
    """dev promoted by ef8eaef's code, whose record's `deployment` is {"status", "image"} only: staging fails
    `loadtest-source` (nothing to judge it on), saying why and what to run, not "pass the load test file that dev's
    promotion recorded (sha256 None)"."""
    store = ModelStore(str(tmp_path / "store"), f"m-{uuid.uuid4().hex[:8]}")
    dev = ops.promote(
        evidence_of(evidence_files), load_config(), "dev", store=store, registry=registry,
        deployer=RecordingDeployer(live_loadtest=evidence_files["loadtest"]),
    )  # fmt: skip
    record_id = dev.record["record_id"]
    edit(Path(store.record_uri(record_id)), lambda r: r["deployment"].pop("loadtest_sha256"))
    report = write_json(tmp_path / "policy" / "staging.json", policy_report("staging"))
    evidence = load_evidence(
        str(evidence_files["candidate"]),
        policy_report=str(report),
        build_record=str(evidence_files["build_record"]),
    )  # no --loadtest: dev's is read from the store
    staging = ops.evaluate(evidence, load_config(), "staging", store=store)
    gate = next(g for g in staging["gates"] if g["name"] == "loadtest-source")
    assert gate["status"] == "fail" and "sha256 None" not in gate["detail"]
    assert f"dev's promotion {record_id} recorded no live load test" in gate["detail"]
    assert "promote this candidate to dev again with --post-deploy-loadtest" in gate["detail"]


def test_keys_a_newer_version_added_to_the_history_survive_a_rollback_here(
    tmp_path: Path, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same format, more keys (what a newer version may add without a new format_version): the history is
    rewritten whole at every event, and used to keep only `environment` and `events`."""
    store, model = old_store(tmp_path, registry)
    history = store / model / "environments" / "dev.json"
    freeze = {"by": "carol", "until": "2026-12-24T00:00:00Z"}
    edit(history, lambda h: (h.update(freeze=freeze), h["events"][1].update(change_ticket="CHG-42")))
    assert main(rollback_args(store, model, registry)) == 0, capsys.readouterr().err
    doc = json.loads(history.read_text())
    assert doc["freeze"] == freeze and doc["events"][1]["change_ticket"] == "CHG-42"
    assert [e["action"] for e in doc["events"]] == ["promote", "promote", "rollback"]
