"""A team's own pretrained model, not the demo's BERT: an XLM-RoBERTa classifier (SentencePiece Unigram
tokenizer, `<pad>` = 1, no token_type_ids, position ids offset by the padding index) exported with int8, built,
served by the real tritonserver with inference records on, and asked in Spanish (accents, ñ, ¿¡).

Before: `sentiment` failed to load ("AttributeError: 'list' object has no attribute 'get'"): the inference
records' tokenizer facts read tokenizer.json's Unigram vocabulary (a list of [piece, score]) as BERT's dict, even
with records off, so no multilingual-e5 / XLM-R model could be served at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from serving.check import reference
from serving.client import SentimentClient
from tests.serving.conftest import serve_recording
from tests.training.team_models import TRAIN, xlmr_folder

pytestmark = pytest.mark.integration

TEXTS = ["¿Qué tal el envío? ¡Llegó rápido!", "Pésimo: XYZ no funciona", "ñandú", "Mañana " * 40]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.export import export_bundle

    model_dir = xlmr_folder(tmp_path_factory.mktemp("xlmr") / "model")
    out = tmp_path_factory.mktemp("xlmr-bundle") / "export"
    texts, labels = zip(*TRAIN, strict=True)
    export_bundle(model_dir, out, texts, labels, max_length=64, quantize=True)
    return out


@pytest.fixture(scope="module")
def served(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    yield from serve_recording(bundle, tmp_path_factory.mktemp("repo-xlmr"))


def test_bundle_has_no_token_type_ids_and_an_int8_graph(bundle: Path) -> None:
    meta = json.loads((bundle / "metadata.json").read_text(encoding="utf-8"))
    assert [i["name"] for i in meta["inputs"]] == ["input_ids", "attention_mask"]
    assert meta["quantization"]["file"] == "model.int8.onnx"
    assert json.loads((bundle / "tokenizer" / "tokenizer.json").read_text())["model"]["type"] == "Unigram"


def test_spanish_answers_match_the_bundle_and_records_count_unknown_pieces(served, bundle: Path) -> None:  # noqa: ANN001
    server, records = served
    with SentimentClient(server.http_url) as client:
        predictions = client.classify(TEXTS)
    labels, probabilities = reference(bundle, TEXTS)
    assert [p.label for p in predictions] == labels
    for pred, row in zip(predictions, probabilities, strict=True):
        assert pred.probabilities == pytest.approx(row, abs=1e-4)
    rows: list[dict] = []
    deadline = time.monotonic() + 30  # the writer flushes every 2 s, off the request path
    while time.monotonic() < deadline and len(rows) < len(TEXTS):
        time.sleep(0.5)
        rows = [json.loads(line) for f in records.rglob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(rows) == len(TEXTS), f"records under {records}: {rows}"
    # Records carry no text: match them by the share of <unk> pieces (id 3) the bundle's tokenizer gives each
    # text (upper-case X, Y, Z never occur in its training text: "Pésimo: XYZ ..." has some).
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(bundle / "tokenizer" / "tokenizer.json"))
    expected = sorted(3 in tokenizer.encode(t).ids for t in TEXTS)
    assert True in expected and False in expected
    assert sorted(r["unk_share"] > 0 for r in rows) == expected
    assert max(r["truncated"] for r in rows) == 1  # "Mañana " x 40 fills the 64 tokens
