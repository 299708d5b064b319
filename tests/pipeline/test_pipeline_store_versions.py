"""The steps that read the champion from the promotion store (data-check, decide-retrain, evaluate), and
`python -m pipeline run`, on a store they cannot read as it is: a record a newer promotion wrote (two versions share
the store during a rollout), or a history cut short. Each is promotion's own error (it names the file and the fix)
with promotion's exit 2: the step used to end in a traceback (PromotionError), then exited 1 as for a store that
does not answer (still 1); `pipeline run` started the run anyway, wrote its record into that store and exited 1
at data-check, where `python -m promotion` exits 2 for the same store."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from pipeline.cli import main
from promotion.errors import PromotionError
from promotion.store import ModelStore
from tests.pipeline.run_cli import kill_session, records, start

RECORD = "20261206T221629Z-dev-promote-f54267af"


def _run_pipeline(store: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    """`python -m pipeline run` on `store` with real drift inputs: the process (ended) and its output."""
    inputs, work = records(tmp_path / "inputs"), tmp_path / "work"
    proc = start("--preset", "smoke", "--store", str(store), "--model", "m", "--work", str(work),
                 "--reference", inputs["reference"], "--current", inputs["current"])  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        kill_session(proc)
    return proc, out


def store_with_champion(root: Path, record: dict | None, history: str | None = None) -> Path:
    store = root / "store"
    (store / "m" / "environments").mkdir(parents=True)
    (store / "m" / "records").mkdir(parents=True)
    event = {"action": "promote", "version": "1", "record_id": RECORD, "serving_image": None}
    (store / "m" / "environments" / "dev.json").write_text(
        history if history is not None else json.dumps({"environment": "dev", "events": [event]})
    )
    if record is not None:
        (store / "m" / "records" / f"{RECORD}.json").write_text(json.dumps(record))
    return store


def decide(work: Path, store: Path) -> int:
    (work / "drift").mkdir(parents=True, exist_ok=True)
    (work / "decisions").mkdir(parents=True, exist_ok=True)
    (work / "drift" / "drift.json").write_text(
        json.dumps({"drift_detected": False, "score": 0.0, "threshold": 0.5})
    )
    (work / "decisions" / "data-check.json").write_text(json.dumps({"changed": False}))
    return main([
        "step", "decide-retrain", "--work", str(work), "--store", str(store), "--model", "m", "--env", "dev",
        "--max-model-age-days", "30",
    ])  # fmt: skip


REFUSED = pytest.mark.parametrize(
    "record, history, says",
    [
        (
            {"format_version": 2, "created": "2026-12-06T22:16:29Z", "lineage": {}},
            None,
            "was written by a newer promotion (format_version 2; this one reads up to 1)",
        ),
        (None, '{"environment": "dev", "ev', "is not valid JSON"),
    ],
    ids=["newer-record", "history-cut-short"],
)


@REFUSED
def test_decide_retrain_names_what_it_cannot_read(
    record: dict | None, history: str | None, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = store_with_champion(tmp_path, record, history)
    # as `python -m promotion` exits; was a PromotionError traceback, then 1
    assert decide(tmp_path / "work", store) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the champion of dev in ") and says in err
    assert not (tmp_path / "work" / "decisions" / "decide-retrain.json").exists()


def test_a_store_that_cannot_be_reached_is_still_a_failed_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("")
    assert decide(tmp_path / "work", tmp_path / "a-file" / "store") == 1
    assert "error: cannot read the promotion store " in capsys.readouterr().err


@pytest.mark.integration
@REFUSED
def test_pipeline_run_refuses_the_store_promotion_refuses_before_any_step(
    record: dict | None, history: str | None, says: str, tmp_path: Path
) -> None:
    store = store_with_champion(tmp_path, record, history)
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    with pytest.raises(PromotionError, match=re.escape(says)):  # `python -m promotion`'s exit 2
        ModelStore(str(store), "m").champion("dev")

    proc, out = _run_pipeline(store, tmp_path)
    assert proc.returncode == 2, out  # was 1: data-check failed after the run had started
    assert f"error: the promotion store {store}: " in out and says in out
    assert "\nRUN " not in "\n" + out and not (tmp_path / "work").exists()
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before  # no pipeline-runs/ record in it


LINEAGE = {"metrics": {"test": {"accuracy": 0.8}}}
EDITED_CREATED = pytest.mark.parametrize(
    "created", ["last week", None, 20261206], ids=["not-a-time", "null", "a-number"]
)


@EDITED_CREATED
def test_a_champion_whose_created_was_edited_is_named_not_a_traceback(
    created: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """decide-retrain reads the champion's age from `created`: a hand-edited one ended the step in a traceback
    (ValueError, AttributeError; exit 1, as for a store that does not answer)."""
    store = store_with_champion(tmp_path, {"created": created, "lineage": LINEAGE})
    assert decide(tmp_path / "work", store) == 2
    err = capsys.readouterr().err
    record = store / "m" / "records" / f"{RECORD}.json"
    assert err.startswith("error: the champion of dev in ") and f"promotion record {record}" in err, err
    assert "`created`" in err and "Traceback" not in err
    assert not (tmp_path / "work" / "decisions" / "decide-retrain.json").exists()


def test_a_champion_created_without_an_offset_is_read_as_utc(tmp_path: Path) -> None:
    """An ISO time without an offset (a hand edit, another writer) is UTC, as monitoring reads one: it failed with
    `can't subtract offset-naive and offset-aware datetimes`."""
    store = store_with_champion(tmp_path, {"created": "2026-01-01T00:00:00", "lineage": LINEAGE})
    assert decide(tmp_path / "work", store) == 0
    doc = json.loads((tmp_path / "work" / "decisions" / "decide-retrain.json").read_text())
    assert doc["retrain"] is True and "days old" in " ".join(doc["reasons"]), doc


@pytest.mark.integration
def test_pipeline_run_refuses_an_edited_champion_created_before_any_step(tmp_path: Path) -> None:
    store = store_with_champion(tmp_path, {"created": "last week", "lineage": LINEAGE})
    proc, out = _run_pipeline(store, tmp_path)
    assert proc.returncode == 2, out  # was 1 at decide-retrain, a traceback, after data-check and drift-check
    assert f"error: the promotion store {store}: " in out and "`created`" in out, out
    assert "\nRUN " not in "\n" + out and not (tmp_path / "work").exists()
