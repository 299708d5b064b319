"""A team's own classifier (three classes, names not alphabetical, accented, capitalised) through the monitoring jobs.

The quality job scored every model as the demo's binary one: F1 with sklearn's binary default (a traceback for
three classes) and the probability of column 1 as "the positive class". It now scores as training does
(training/metrics.py) and reads the served probabilities by class name, in the manifest's class-id order.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from monitoring.errors import InputError
from tests.serving.conftest import start_server

LABELS = ("billing", "Técnico", "Account")
WORDS = {
    "billing": ["invoice", "refund", "charge", "payment", "bill", "price"],
    "Técnico": ["error", "crash", "login", "bug", "server", "timeout"],
    "Account": ["password", "email", "profile", "address", "account", "name"],
}


def team_data(folder: Path, rows: int = 600) -> Path:
    rng = random.Random(0)
    path = folder / "tickets.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["texto", "categoria"])
        for i in range(rows):
            # A rare class, as a ticket router's data has: 5% Account.
            label = rng.choices(LABELS, (0.6, 0.35, 0.05))[0]
            out.writerow([f"ticket {i} " + " ".join(rng.choice(WORDS[label]) for _ in range(6)), label])
    return path


def manifest_for(data: Path, labels: tuple[str, ...], out: Path) -> Path:
    """The split manifest training writes for the team's data with `labels` as its class ids."""
    from training.config import DataConfig
    from training.data import load

    config = DataConfig(source=str(data), text_column="texto", label_column="categoria", labels=labels)
    out.write_text(json.dumps(load(config, use_cache=False).manifest))
    return out


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from training.export import make_tiny_bundle

    folder = tmp_path_factory.mktemp("team")
    data = team_data(folder)
    return {
        "bundle": make_tiny_bundle(folder / "export", seed=0, labels=LABELS),
        "manifest": manifest_for(data, LABELS, folder / "manifest.json"),
        # The same rows with the classes numbered in another order.
        "reordered": manifest_for(data, (LABELS[2], LABELS[0], LABELS[1]), folder / "reordered.json"),
        "binary": manifest_for(data, LABELS[:2], folder / "binary.json"),
    }


def test_scores_are_training_s_for_three_classes() -> None:
    from monitoring.evaluate import scores

    labels = [0, 0, 1, 1, 2, 2]
    probs = [
        [0.8, 0.1, 0.1],
        [0.6, 0.3, 0.1],
        [0.2, 0.7, 0.1],
        [0.5, 0.4, 0.1],
        [0.1, 0.2, 0.7],
        [0.3, 0.3, 0.4],
    ]
    got = scores(labels, probs)
    # argmax 0,0,1,0,2,2: class 2 perfect, class 1 half recalled, class 0 one false positive.
    assert got["accuracy"] == round(5 / 6, 4)
    assert got["f1"] == round((0.8 + 2 / 3 + 1.0) / 3, 4)  # macro: each class weighs the same
    assert 0.5 < got["auc"] <= 1.0


@pytest.mark.integration
def test_quality_job_on_a_three_class_endpoint(team: dict[str, Path], tmp_path: Path) -> None:
    from monitoring import evaluate
    from serving.repository import BuildOptions, build

    repo = tmp_path / "models"
    build(team["bundle"], repo, options=BuildOptions())
    server_iter = start_server(repo)
    server = next(server_iter)
    try:
        quality = evaluate.run(server.http_url, team["manifest"], team["bundle"], rows=60)
        reordered = evaluate.run(server.http_url, team["reordered"], team["bundle"], rows=60)
        with pytest.raises(InputError, match=r"classifies into .* but the manifest's data has the classes"):
            evaluate.run(server.http_url, team["binary"], team["bundle"], rows=60)
    finally:
        server_iter.close()
    assert quality["rows"] >= 30 and set(quality["measured"]) == {"accuracy", "f1", "auc"}
    assert all(0.0 <= v <= 1.0 for v in quality["measured"].values())
    # Class ids are names' positions: numbering the classes otherwise changes no score (it used to take the
    # probability of whatever class the bundle answered second as "positive").
    assert reordered["measured"] == quality["measured"]
