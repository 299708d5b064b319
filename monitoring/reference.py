"""The training reference: the split manifest's data, described exactly as serving describes requests.

`python -m monitoring reference --manifest runs/demo/train/manifest.json --bundle runs/demo/train/export
--out ref.jsonl` reloads the split the manifest names (training.data.load: same source, seed and
fractions; the split's sha256 must match the manifest's, or the data changed), samples `rows` texts, and writes one record per text with the fields of monitoring/records.py: descriptors from
the bundle's tokenizer, prediction and probability from the bundle's ONNX model (ONNX Runtime, in
process). The reference split is `validation`, taken whole (the row limits of budgeted presets only cut
the first N rows of each split, so the rest was never used): held out from fitting, it has the inputs'
distribution of the training data without the model's over-confidence on texts it was fitted to
(measured on the smoke model: median probability 0.904 on its training rows, 0.897 on held-out ones,
a K-S p-value of 0 against a clean window). `drift --reference` reads that file, or builds it on the fly from a manifest.json.

`records_for_texts` is the same path for any list of texts: tests and benchmarks use it to make
windows (clean: the test split; shifted: another domain) without a server.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from monitoring.errors import InputError
from monitoring.records import TokenizerFacts, make_record

DEFAULT_ROWS = 2000
BATCH = 64


def _bundle(bundle_dir: Path) -> dict[str, Any]:
    meta_path = bundle_dir / "metadata.json"
    if not meta_path.is_file() or not (bundle_dir / "tokenizer" / "tokenizer.json").is_file():
        raise InputError(
            f"{bundle_dir} is not an export bundle (metadata.json, tokenizer/): pass the run's export/"
        )
    return json.loads(meta_path.read_text())


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def records_for_texts(
    texts: Sequence[str], bundle_dir: str | Path, *, precision: str = "fp32", ts: float | None = None
) -> list[dict[str, Any]]:
    """One record per text, as the serving model would write it (latency_ms None: nothing was served)."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    bundle_dir = Path(bundle_dir)
    meta = _bundle(bundle_dir)
    max_length = int(meta["max_length"])
    tokenizer = Tokenizer.from_file(str(bundle_dir / "tokenizer" / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    facts = TokenizerFacts.from_files(str(bundle_dir / "tokenizer" / "tokenizer.json"), max_length)
    labels = (
        json.loads((bundle_dir / "labels.json").read_text())
        if (bundle_dir / "labels.json").is_file()
        else meta["labels"]
    )
    model = bundle_dir / ("model.int8.onnx" if precision == "int8" else "model.onnx")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    encodings = tokenizer.encode_batch([str(t) for t in texts])
    order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))  # little padding per batch
    probabilities: list[Any] = [None] * len(encodings)
    for start in range(0, len(order), BATCH):
        rows = order[start : start + BATCH]
        length = max(len(encodings[i].ids) for i in rows)
        ids = np.zeros((len(rows), length), dtype=np.int64)
        mask = np.zeros((len(rows), length), dtype=np.int64)
        for r, i in enumerate(rows):
            ids[r, : len(encodings[i].ids)] = encodings[i].ids
            mask[r, : len(encodings[i].ids)] = 1
        (logits,) = session.run(["logits"], {"input_ids": ids, "attention_mask": mask})
        logits = logits.astype(np.float64)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        for r, i in enumerate(rows):
            probabilities[i] = p[r].tolist()
    now = time.time() if ts is None else ts
    return [
        make_record(
            ids=enc.ids,
            facts=facts,
            labels=labels,
            probabilities=probs,
            # A bundle exported without --model-version has none: null, not the string "None".
            model=_text(meta.get("model_name")),
            model_version=_text(meta.get("model_version")),
            latency_ms=None,
            ts=now,
        )  # fmt: skip
        for enc, probs in zip(encodings, probabilities, strict=True)
    ]


REFERENCE_SPLIT = "validation"


def split_texts(
    manifest_path: str | Path, split: str = "train", *, encoding: str | None = None, whole: bool = True
) -> tuple[list[str], list[int], dict[str, Any]]:
    """The texts and labels of one split of the manifest's dataset, checked against the manifest.

    whole: the split without the preset's row limit (its first rows are the ones training used).
    """
    import dataclasses

    from training.config import DataConfig
    from training.data import Split, _split_digest, load
    from training.errors import TrainingError

    path = Path(manifest_path)
    if not path.is_file():
        raise InputError(f"{path} does not exist: pass the training run's manifest.json")
    try:
        manifest = json.loads(path.read_text())
        source = manifest["source"]["uri"]
        limits = manifest.get("limits") or {}
        # A manifest written before the hash split (format 1) names no split: its rows came from the shuffle.
        method = manifest.get("split", "shuffle")
        if method not in ("hash", "shuffle"):
            raise InputError(
                f"{path} was split by {method!r}, which this monitoring does not know: a newer training wrote "
                "it; run the drift job from the image of the training that made the run"
            )
        config = DataConfig(
            source=source, text_column=manifest["text_column"], label_column=manifest["label_column"],
            labels=tuple(manifest["labels"]), encoding=encoding, seed=manifest["seed"], split=method,
            val_fraction=manifest["val_fraction"], test_fraction=manifest["test_fraction"],
            max_train_rows=limits.get("train"), max_val_rows=limits.get("validation"), max_test_rows=limits.get("test"),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"{path} is not a training split manifest ({exc}): pass <run>/manifest.json"
        ) from None
    if whole:
        config = dataclasses.replace(config, max_train_rows=None, max_val_rows=None, max_test_rows=None)
    try:
        data = load(config).splits[split]
    except TrainingError as exc:
        raise InputError(f"reloading the manifest's data failed: {exc}") from None
    want, n = manifest["splits"][split]["sha256"], manifest["splits"][split]["rows"]
    got = _split_digest(Split(data.texts[:n], data.labels[:n]), tuple(manifest["labels"]))
    if want != got:
        raise InputError(
            f"the {split} split of {source} no longer matches {path} (sha256 {got[:12]} != {want[:12]}): "
            "the data changed since training; pass --data-encoding if the CSV is not UTF-8"
        )
    return data.texts, data.labels, manifest


def build(
    manifest_path: str | Path, bundle_dir: str | Path, *, rows: int = DEFAULT_ROWS, seed: int = 0,
    encoding: str | None = None, precision: str = "fp32",
) -> list[dict[str, Any]]:  # fmt: skip
    texts, _, _ = split_texts(manifest_path, REFERENCE_SPLIT, encoding=encoding)
    if len(texts) > rows:
        texts = random.Random(seed).sample(texts, rows)
    return records_for_texts(texts, bundle_dir, precision=precision)


def write_jsonl(records: Sequence[dict[str, Any]], path: str | Path) -> None:
    """Replaces `path` only once complete: a failed write (full disk) keeps the previous reference whole, where a
    truncated one would be read as a smaller, skewed reference by the next drift run."""
    from monitoring.outputs import replacing

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
