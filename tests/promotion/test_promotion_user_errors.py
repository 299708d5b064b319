"""What a first-time user gets wrong, judged as promotion/README.md says (exit 2 with the fix, or a failed gate).

- An approval whose `approved_at` is not a time, or lies in the future, passed the prod gate ("approved by bob at
  yesterday"): the record an auditor reads named no real time.
- gates.toml: `promote_from = ["dev"]` and a file that is not UTF-8 were tracebacks with exit 1 (a gate's rejection
  to the workflows), a folder for it an exit 2 blaming --store; `slo_p99_ms = inf`, a tolerance above 1 on a metric in [0, 1] and a `promote_from`
  cycle were accepted, making a gate that can never fail, or one no candidate can ever pass.
- A hand-edited champion record without `lineage.metrics` made `not-worse-than-champion` say "no model is promoted
  to dev yet" (not applicable: any candidate passed), or was an AttributeError traceback with exit 1.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from promotion_fixtures import loadtest, make_candidate, write_json

from promotion import gates
from promotion.__main__ import main
from promotion.config import DEFAULT_CONFIG, load_config
from promotion.errors import ConfigError, PromotionError
from promotion.store import ModelStore

PROD = load_config().environment("prod")
NOW = dt.datetime(2026, 12, 2, 15, 0, tzinfo=dt.UTC)
GOOD = {"approver": "bob", "approved_at": "2026-12-02T10:00:00Z", "environment": "prod", "reference": "run 7"}


@pytest.mark.parametrize(
    ("approved_at", "detail"),
    [
        ("2099-01-01T00:00:00Z", "approved_at 2099-01-01T00:00:00Z is in the future"),
        ("yesterday", "approved_at 'yesterday' is not an ISO 8601 time"),
        ("2026-12-02T10:00:00", "approved_at '2026-12-02T10:00:00' has no time zone"),
        (1733130000, "approved_at 1733130000 is not an ISO 8601 time"),
    ],
)
def test_an_approval_without_a_real_past_time_fails(approved_at: object, detail: str) -> None:
    result = gates.approval(GOOD | {"approved_at": approved_at}, PROD, requested_by="alice", now=NOW)
    assert result.status == "fail" and detail in result.detail


def test_an_approval_in_the_past_passes_whatever_its_zone() -> None:
    assert gates.approval(GOOD, PROD, requested_by="alice", now=NOW).status == "pass"
    madrid = GOOD | {"approved_at": "2026-12-02T16:00:00+01:00"}  # 15:00Z: now, not the future
    assert gates.approval(madrid, PROD, requested_by="alice", now=NOW).status == "pass"
    # GitHub's review and this job read one clock within seconds: a runner's small skew is not the future.
    skewed = GOOD | {"approved_at": "2026-12-02T15:01:00Z"}
    assert gates.approval(skewed, PROD, requested_by="alice", now=NOW).status == "pass"


def test_gates_toml_not_utf8_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gates.toml"
    path.write_bytes(DEFAULT_CONFIG.read_text().encode("utf-16"))  # an editor's "Unicode" save
    with pytest.raises(ConfigError, match="is not UTF-8"):
        load_config(path)
    args = ["history", "--env", "dev", "--store", str(tmp_path / "store"), "--config", str(path)]
    assert main(args) == 2
    assert "is not UTF-8" in capsys.readouterr().err
    # A folder given for the file: the message blamed --store ("check that ... can be reached and written").
    assert main([*args[:-1], str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"gate config {tmp_path} not found" in err and "--store" not in err


def champion_store(
    tmp_path: Path, lineage_metrics: object, created: object = "2026-12-06T22:16:29Z"
) -> ModelStore:
    store = ModelStore(str(tmp_path / "store"), "m")
    lineage = {"dataset_manifest_sha256": "a" * 64, "metrics": lineage_metrics}
    record = {"record_id": "r1", "created": created, "lineage": lineage}
    store.write_record(record, "card")
    store.append_event("dev", {"action": "promote", "version": "1", "record_id": "r1"})
    return store


@pytest.mark.parametrize("lineage_metrics", [None, "x", {"test": None}, {"baselines": {}}])
def test_a_champion_record_without_its_metrics_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lineage_metrics: object
) -> None:
    store = champion_store(tmp_path, lineage_metrics)
    uri = store.record_uri("r1")
    with pytest.raises(PromotionError, match=f"promotion record {uri} .*`lineage.metrics.test`"):
        store.champion("dev")
    history = Path(store.history_uri("dev")).read_text()
    candidate = make_candidate(tmp_path / "run")
    lt = write_json(tmp_path / "lt.json", loadtest())
    args = ["evaluate", "--env", "dev", "--store", str(tmp_path / "store"), "--model-name", "m",
            "--candidate", str(candidate), "--loadtest", str(lt), "--no-images", "--local-run"]  # fmt: skip
    assert main(args) == 2  # was 0 ("no model is promoted to dev yet") or an AttributeError with exit 1
    err = capsys.readouterr().err
    assert "`lineage.metrics.test`" in err and "restore it" in err and "Traceback" not in err
    assert Path(store.history_uri("dev")).read_text() == history


@pytest.mark.parametrize("created", ["last week", None, 20261206])
def test_a_champion_record_whose_created_is_no_time_is_bad_input(tmp_path: Path, created: object) -> None:
    """The pipeline's schedule condition ages the champion by it (a traceback at decide-retrain, exit 1)."""
    store = champion_store(tmp_path, {"test": {"accuracy": 0.9}}, created=created)
    with pytest.raises(PromotionError, match=f"promotion record {store.record_uri('r1')} .*`created`"):
        store.champion("dev")


def test_a_champion_record_with_its_metrics_reads(tmp_path: Path) -> None:
    store = champion_store(tmp_path, {"test": {"accuracy": None}, "baselines": {}})  # a diverged run's null
    current = store.champion("dev")
    assert current is not None and current[0].version == "1"
    assert json.loads(Path(store.record_uri("r1")).read_text())["lineage"]["metrics"]["test"] == {
        "accuracy": None
    }
