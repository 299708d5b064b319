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


def scores(labels: list[int], probabilities: list[list[float]]) -> dict[str, float]:
    """accuracy, F1 and AUC as training scores its test split (training/metrics.py `scores`, the one definition),
    so `delta` compares like with like: two classes, F1 and AUC of class id 1; three or more, macro F1 and the mean
    one-vs-rest AUC over the classes present. An AUC the sample cannot give (one class only) is left out.

    `probabilities`: one row per text, a column per class in class-id order."""
    import math

    from training.metrics import scores as training_scores

    out = training_scores(labels, probabilities)
    return {k: round(v, 4) for k, v in out.items() if not math.isnan(v)}


def _served_labels(bundle: Path, meta: dict[str, Any], names: list[str]) -> list[str]:
    """The bundle's classes in the order its probabilities come in (labels.json, as serving reads it), checked
    against the manifest's: a sample scored by a model of other classes would be a wrong answer, not a low one."""
    path = Path(bundle) / "labels.json"
    served = json.loads(path.read_text()) if path.is_file() else meta.get("labels")
    if not isinstance(served, list) or sorted(map(str, served)) != sorted(names):
        raise InputError(
            f"{bundle} classifies into {served!r} but the manifest's data has the classes {names!r}: pass the "
            "manifest.json of the run that trained this bundle"
        )
    return [str(s) for s in served]


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
    names = [str(n) for n in man["labels"]]
    served = _served_labels(bundle, meta, names)
    # Columns in the manifest's class-id order, whatever order the bundle answers in.
    column = [served.index(n) for n in names]
    probabilities: list[list[float]] = []
    try:
        with SentimentClient(url) as client:
            for start in range(0, len(pairs), BATCH):
                for pred in client.classify([t for t, _ in pairs[start : start + BATCH]]):
                    if pred.label not in names or len(pred.probabilities) != len(served):
                        raise InputError(
                            f"endpoint {url} answered {pred.label!r} with {len(pred.probabilities)} probabilities, "
                            f"but {bundle} classifies into {served}: the endpoint serves another model than --bundle"
                        )
                    probabilities.append([float(pred.probabilities[i]) for i in column])
    except ServingError as exc:
        raise InputError(f"endpoint {url}: {exc}") from None
    measured = scores([y for _, y in pairs], probabilities)
    training = {
        k: float(v) for k, v in (meta.get("metrics") or {}).items() if k in measured and v is not None
    }
    return {"url": url, "rows": len(pairs), "measured": measured, "training": training,
            "delta": {k: round(measured[k] - training[k], 4) for k in training}}  # fmt: skip
