"""Quality on a labelled sample sent through the live endpoint, against the model's training metrics.

The sample is the test split the manifest names (never seen in training); the bar is the bundle's
metadata.json `metrics` (the promoted model's test metrics from training).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from monitoring.errors import InputError
from monitoring.reference import split_texts

BATCH = 32


def scores(labels: list[int], predicted: list[int], positive_probability: list[float]) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

    out = {"accuracy": float(accuracy_score(labels, predicted)), "f1": float(f1_score(labels, predicted))}
    if len(set(labels)) == 2:
        out["auc"] = float(roc_auc_score(labels, positive_probability))
    return {k: round(v, 4) for k, v in out.items()}


def run(
    url: str, manifest: Path, bundle: Path, *, rows: int = 500, encoding: str | None = None, seed: int = 0
) -> dict[str, Any]:
    from serving.client import SentimentClient
    from serving.errors import ServingError

    meta_path = Path(bundle) / "metadata.json"
    if not meta_path.is_file():
        raise InputError(f"{bundle} has no metadata.json: pass the promoted export bundle")
    meta = json.loads(meta_path.read_text())
    texts, labels, man = split_texts(manifest, "test", encoding=encoding)
    pairs = list(zip(texts, labels, strict=True))
    if len(pairs) > rows:
        pairs = random.Random(seed).sample(pairs, rows)
    names = list(man["labels"])
    predicted, positive = [], []
    try:
        with SentimentClient(url) as client:
            for start in range(0, len(pairs), BATCH):
                for pred in client.classify([t for t, _ in pairs[start : start + BATCH]]):
                    predicted.append(names.index(pred.label))
                    positive.append(float(pred.probabilities[1]))
    except ServingError as exc:
        raise InputError(f"endpoint {url}: {exc}") from None
    measured = scores([y for _, y in pairs], predicted, positive)
    training = {
        k: float(v) for k, v in (meta.get("metrics") or {}).items() if k in measured and v is not None
    }
    return {"url": url, "rows": len(pairs), "measured": measured, "training": training,
            "delta": {k: round(measured[k] - training[k], 4) for k in training}}  # fmt: skip
