"""A team's own classes: a 4-class ticket router (names with a space, an accent, upper case in the data,
not in alphabetical order, one rare class) trained, scored, evaluated and exported like the demo's model."""

from __future__ import annotations

import csv
import json
import random
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from training import metrics

# Class id = position in data.labels: deliberately not alphabetical.
LABELS = ("Technical support", "Facturación", "account", "other")
WORDS = {
    "Technical support": ["crash", "error", "bug", "freeze", "install", "update", "timeout", "screen"],
    "Facturación": ["invoice", "refund", "charge", "payment", "billing", "price", "receipt", "vat"],
    "account": ["password", "email", "profile", "username", "signup", "settings", "login", "delete"],
    "other": ["hello", "feedback", "suggestion", "office", "hours", "partnership", "press", "job"],
}


def _tickets(path: Path) -> Path:
    """Seeded rows, two keywords of the class per text; 'other' is rare (1 in 8)."""
    rng = random.Random(0)
    rows = []
    for label, words in WORDS.items():
        for i in range(25 if label == "other" else 90):
            text = f"ticket {rng.choice(words)} {rng.choice(words)} please {rng.randint(0, 10**6)}"
            # As teams' exports write them: some upper case, the accent as a combining character (NFD).
            written = (
                label.upper() if i % 4 == 0 else unicodedata.normalize("NFD", label) if i % 4 == 1 else label
            )
            rows.append((text, written))
    rng.shuffle(rows)
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(("text", "label"))
        writer.writerows(rows)
    return path


def test_scores_for_more_than_two_classes_are_sklearns_macro_definitions() -> None:
    """Before: scores() took the positive-class column only (p >= 0.5 on a matrix): no multi-class metric."""
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, size=200)
    logits = rng.normal(size=(200, 4)) + 2.0 * np.eye(4)[y]
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    got = metrics.scores(y, p)
    assert got["accuracy"] == pytest.approx(accuracy_score(y, p.argmax(axis=1)))
    assert got["f1"] == pytest.approx(f1_score(y, p.argmax(axis=1), average="macro"))
    assert got["auc"] == pytest.approx(roc_auc_score(y, p, multi_class="ovr", average="macro"))
    # Two classes: unchanged, whether given the matrix or the positive column.
    binary = p[:, :2] / p[:, :2].sum(axis=1, keepdims=True)
    yb = y % 2
    assert metrics.scores(yb, binary) == metrics.scores(yb, binary[:, 1])
    assert metrics.scores(yb, binary[:, 1])["f1"] == pytest.approx(f1_score(yb, binary[:, 1] >= 0.5))


def test_a_rare_class_missing_from_a_small_split_does_not_corrupt_the_scores() -> None:
    p = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1], [0.1, 0.8, 0.1]])
    y = np.array([0, 1, 0, 1])  # class 2 neither present nor predicted: no F1 or AUC of its own to average
    assert metrics.scores(y, p) == {"accuracy": 1.0, "f1": 1.0, "auc": 1.0}


def test_a_class_with_no_training_rows_is_refused_naming_it(tmp_path: Path) -> None:
    from training.config import DataConfig
    from training.data import load
    from training.errors import DataError

    source = _tickets(tmp_path / "t.csv")
    with pytest.raises(DataError, match=r"no rows of 'billing'.*leave it out of data.labels"):
        load(DataConfig(source=str(source), labels=(*LABELS, "billing")), use_cache=False)


@pytest.mark.slow
def test_a_ticket_router_trains_evaluates_and_exports(tmp_path: Path) -> None:
    """Before: data.labels had to be exactly two names (exit 2): a team's own classes could not train."""
    from training.cli import main

    source = _tickets(tmp_path / "tickets.csv")
    out = tmp_path / "run"
    labels = "data.labels=" + ",".join(LABELS)
    run = ["data.source=" + str(source), "data.max_test_rows=60", "max_steps=30", "eval_every_steps=10"]
    assert main(["train", "--preset", "smoke", "--output", str(out), labels, *run]) == 0

    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["labels"] == list(LABELS)
    assert manifest["rows"]["other_label_dropped"] == 0  # upper case and NFD accents matched their class
    assert all(manifest["splits"]["train"]["label_counts"][name] > 0 for name in LABELS)
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    for scores in (m["test"], m["validation"], m["baselines"]["tfidf_logreg"], m["baselines"]["majority"]):
        assert set(scores) == {"accuracy", "f1", "auc"}
        assert all(0.0 <= value <= 1.0 for value in scores.values())  # no NaN AUC, no binary-only F1
    assert m["baselines"]["majority"]["auc"] == 0.5
    assert any("val_auc" in row for row in m["history"])

    bundle = out / "export"
    assert json.loads((bundle / "labels.json").read_text(encoding="utf-8")) == list(LABELS)
    meta = json.loads((bundle / "metadata.json").read_text(encoding="utf-8"))
    assert meta["outputs"][0]["shape"] == [-1, 4] and meta["parity"]["labels_identical"]
    assert meta["metrics"] == m["test"]

    # `evaluate` and `export` take the model's classes from the model, not the preset's negative/positive.
    scored = tmp_path / "eval.json"
    assert (
        main(["evaluate", "--model", str(out / "model"), "--preset", "smoke", "--out", str(scored), *run])
        == 0
    )
    assert json.loads(scored.read_text(encoding="utf-8"))["test"] == pytest.approx(m["test"], abs=1e-6)
    reexport = tmp_path / "again"
    argv = ["export", str(out / "model"), *run, "--out", str(reexport), "--preset", "smoke", "--no-optimize"]
    assert main(argv) == 0
    assert json.loads((reexport / "labels.json").read_text(encoding="utf-8")) == list(LABELS)
