"""The steps that read the champion from the promotion store (data-check, decide-retrain, evaluate) on a store they
cannot read as it is: a record a newer promotion wrote (two versions share the store during a rollout), or a
history cut short. Each is promotion's own error (it names the file and the fix), printed by the step with exit 1
as for a store that does not answer; it used to be a traceback (PromotionError), and the log a person reads in Argo
ended in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli import main

RECORD = "20261206T221629Z-dev-promote-f54267af"


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


@pytest.mark.parametrize(
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
def test_decide_retrain_names_what_it_cannot_read(
    record: dict | None, history: str | None, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = store_with_champion(tmp_path, record, history)
    assert decide(tmp_path / "work", store) == 1  # was a PromotionError traceback
    err = capsys.readouterr().err
    assert err.startswith("error: the champion of dev in ") and says in err
    assert not (tmp_path / "work" / "decisions" / "decide-retrain.json").exists()
