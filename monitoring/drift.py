"""Drift between the training reference and a window of inference records, with Evidently.

Features compared (each drifted or not, by Evidently's own tests, chosen by Evidently per column type
and sample size: Wasserstein / Jensen-Shannon distance over 1,000 rows, K-S / chi-square below):

    n_tokens, unk_share, truncated     input descriptors
    prediction, probability            prediction drift
    embedding                          the records' token-embedding projection (emb_*), Evidently's
                                       model-based embedding drift (a classifier told to tell the two
                                       windows apart; drift when its ROC AUC, the mean over seeded
                                       splits of the rows in a canonical order, is > 0.55)

score = share of drifted features; drift_detected = score >= threshold.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitoring.errors import InputError
from monitoring.records import EMBEDDING

os.environ.setdefault("DO_NOT_TRACK", "1")  # Evidently's telemetry switch: never phone home

NUMERICAL = ("n_tokens", "unk_share", "probability")
CATEGORICAL = ("truncated", "prediction")
COLUMNS = ("n_tokens", "unk_share", "truncated", "prediction", "probability")
FEATURES = (*COLUMNS, "embedding")
DEFAULT_THRESHOLD = 0.3
"""Two of six features drifted: one alone (e.g. the prediction mix of a busy day) is not an alarm."""
EMBEDDING_AUC = 0.55
EMBEDDING_SPLITS = 5
"""Evidently's method fits and scores one seeded split of the rows as they come: on one clean demo window its
ROC AUC ranged 0.497-0.552 with the order the records arrived in, so one split could raise a false alarm."""


@dataclass(frozen=True, slots=True)
class DriftResult:
    report: dict[str, Any]
    snapshot: Any  # Evidently's Snapshot (its HTML is drift.html)


# Values a record of this version can hold (monitoring/records.py); anything else is a broken writer or model.
_BOUNDS = {"n_tokens": (0.0, float("inf")), "unk_share": (0.0, 1.0), "probability": (0.0, 1.0)}


def _bad_values(frame: Any, name: str, col: str, bad: Any, what: str) -> InputError:
    import numpy as np

    pos = int(np.flatnonzero(bad.to_numpy())[0])
    row = frame.iloc[pos]
    where = f"record {pos + 1} of {len(frame)}" + (f", ts {row['ts']}" if "ts" in frame.columns else "")
    return InputError(
        f"{name}: {int(bad.sum())} record(s) have {what} in column {col} (first: {row[col]!r}, {where}); "
        "records of this version always hold one: a broken writer or model, or not inference records"
    )


def _prepare(frame: Any, name: str) -> Any:
    """Typed copy of the record columns; a missing, non-finite or out-of-range value is an InputError (exit 2):
    Evidently drops NaN silently (a window of NaN probabilities read as "no drift") and the embedding's
    classifier refuses it with a traceback."""
    import numpy as np
    import pandas as pd

    # Only the columns read below (ts names a bad record), each a view copied on write (pandas 3): the caller's
    # frame is never changed, and a column already of its type is not copied. frame.copy() copied the whole window.
    frame = pd.DataFrame(
        {c: frame[c] for c in ("ts", *COLUMNS, *EMBEDDING) if c in frame.columns}, copy=False
    )
    for col in ("n_tokens", "unk_share", "probability", *EMBEDDING):
        try:
            values = frame[col].astype(float)
        except (TypeError, ValueError):
            raise InputError(f"{name}: column {col} is not numeric: records of another schema?") from None
        if not np.isfinite(values).all():
            raise _bad_values(frame, name, col, ~np.isfinite(values), "a missing or non-finite value")
        low, high = _BOUNDS.get(col, (-np.inf, np.inf))
        outside = (values < low) | (values > high)
        if outside.any():
            raise _bad_values(frame, name, col, outside, f"a value outside [{low:g}, {high:g}]")
        frame[col] = values
    for col in CATEGORICAL:
        missing = frame[col].isna()
        if missing.any():
            raise _bad_values(frame, name, col, missing, "no value")
        frame[col] = frame[col].astype(str)
    return frame


def summary(frame: Any, source: str) -> dict[str, Any]:
    preds = frame["prediction"].value_counts(normalize=True)
    out = {
        "source": source,
        "rows": int(len(frame)),
        "prediction_shares": {str(k): round(float(v), 4) for k, v in preds.items()},
        "n_tokens_mean": round(float(frame["n_tokens"].mean()), 3),
        "unk_share_mean": round(float(frame["unk_share"].mean()), 5),
    }
    if "ts" in frame.columns and frame["ts"].notna().any():
        out["first_ts"], out["last_ts"] = str(frame["ts"].min()), str(frame["ts"].max())
    return out


IDENTITY = ("model", "model_version")
"""The record fields naming the model that wrote it (monitoring/records.py)."""


def _identity(key: Any) -> tuple[str | None, ...]:
    """A groupby key (a scalar for one field, a tuple for more; NaN for null) as comparable strings."""
    import pandas as pd

    return tuple(None if pd.isna(v) else str(v) for v in (key if isinstance(key, tuple) else (key,)))


def _named(fields: list[str], keys: Any) -> str:
    return ", ".join(
        " ".join(f"{f}={'null' if v is None else v}" for f, v in zip(fields, key, strict=True))
        for key in sorted(keys, key=str)
    )


def _of_reference_model(reference: Any, current: Any, current_source: str) -> tuple[Any, dict[str, int]]:
    """The current records written by the model the reference describes, and the others' counts by identity.

    A reference's predictions and probabilities are its model's: against the records of another model (a version
    promoted since the reference was built, another model writing to the prefix) the prediction features measure
    the model change, not the inputs, and the verdict was published without a word. A window spanning a rollout
    holds both: the reference's model is judged, the others are counted. Only the identity fields the reference
    has a value for are compared: a bundle exported without a version gives the reference null while serving
    writes Triton's version folder (serving/models/sentiment.py)."""
    fields = [
        f for f in IDENTITY if f in reference.columns and f in current.columns and reference[f].notna().any()
    ]
    if not fields:
        return current, {}
    known = {_identity(k) for k in reference.groupby(fields, dropna=False, sort=False).size().index}
    grouped = current.groupby(fields, dropna=False, sort=False)
    counts = grouped.size()
    keys = [_identity(k) for k in counts.index]
    sizes = dict(zip(keys, counts, strict=True))
    excluded = {_named(fields, [key]): int(n) for key, n in sizes.items() if key not in known}
    if not excluded:
        return current, {}
    if sum(excluded.values()) == len(current):
        raise InputError(
            f"{current_source}: every record is of {_named(fields, keys)}, the reference of {_named(fields, known)}: "
            "drift against another model's reference measures the model change, not the inputs. Rebuild the "
            "reference from the served model's training run (python -m monitoring reference --manifest "
            "RUN/manifest.json --bundle RUN/export --out REF.jsonl; for a stack's drift job, python -m promotion "
            "reference --env ENV --drift-reference REF writes the served version's), or pass that manifest.json as "
            "--reference"
        )
    keep = grouped.ngroup().isin([i for i, key in enumerate(keys) if key in known]).to_numpy()
    return current[keep], excluded


def compute(
    reference: Any, current: Any, *, threshold: float = DEFAULT_THRESHOLD,
    reference_source: str = "reference", current_source: str = "current",
) -> DriftResult:  # fmt: skip
    if not 0 < threshold <= 1:
        raise InputError(f"threshold {threshold}: must be in (0, 1] (the share of drifted features)")
    current, excluded = _of_reference_model(reference, current, current_source)
    for frame, name in ((reference, reference_source), (current, current_source)):
        if len(frame) < 10:
            left_out = (
                f" ({sum(excluded.values())} of other models left out)"
                if excluded and frame is current
                else ""
            )
            raise InputError(
                f"{name}: {len(frame)} records{left_out} are too few to judge drift; use a window of >= 10"
            )
    ref, cur = _prepare(reference, reference_source), _prepare(current, current_source)
    from evidently import DataDefinition, Dataset, Report  # after the checks: bad input costs no import
    from evidently.metrics import DriftedColumnsCount, ValueDrift

    definition = DataDefinition(numerical_columns=list(NUMERICAL), categorical_columns=list(CATEGORICAL))
    metrics = [ValueDrift(column=c) for c in COLUMNS]
    snapshot = Report([DriftedColumnsCount(columns=list(COLUMNS)), *metrics]).run(
        Dataset.from_pandas(cur[list(COLUMNS)], data_definition=definition),
        Dataset.from_pandas(ref[list(COLUMNS)], data_definition=definition),
    )
    features: dict[str, dict[str, Any]] = {}
    for result in snapshot.dict()["metrics"]:
        config = result["config"]
        if config["type"].endswith("ValueDrift"):
            value, limit, method = float(result["value"]), float(config["threshold"]), config["method"]
            # Evidently: a distance drifts above its threshold, a p-value below it.
            drifted = value < limit if "p_value" in method or "test" in method.lower() else value >= limit
            features[config["column"]] = {"drifted": bool(drifted), "value": round(value, 6),
                                          "threshold": limit, "method": method}  # fmt: skip
    aucs = _embedding_aucs(cur, ref)
    auc = sum(aucs) / len(aucs)
    features["embedding"] = {"drifted": auc > EMBEDDING_AUC, "value": round(auc, 6), "threshold": EMBEDDING_AUC,
                             "method": f"Evidently ModelDriftMethod (domain classifier ROC AUC, mean of "
                                       f"{len(aucs)} splits)",
                             "split_values": [round(a, 6) for a in aucs]}  # fmt: skip
    score = sum(f["drifted"] for f in features.values()) / len(features)
    report = {
        "drift_detected": score >= threshold,
        "score": round(score, 4),
        "threshold": threshold,
        "features": features,
        "reference": summary(ref, reference_source),
        "current": summary(cur, current_source) | {"excluded": excluded},
    }
    return DriftResult(report, snapshot)


def _embedding_aucs(current: Any, reference: Any) -> list[float]:
    """The domain classifier's ROC AUC on EMBEDDING_SPLITS splits: a function of the two windows' rows, not
    of their order. Evidently's model-based embedding drift (ModelDriftMethod) is computed directly: its Report
    metric also fits a t-SNE of 5,000 points for the plot, which takes minutes on 2 cores, and the method itself
    copies both windows several times per split (monitoring/embedding_drift.py computes its AUCs in one buffer)."""
    from monitoring.embedding_drift import domain_classifier_aucs

    return domain_classifier_aucs(current, reference, EMBEDDING, EMBEDDING_SPLITS)


def write(result: DriftResult, out: Path) -> None:
    import json

    from monitoring.outputs import replacing

    out.mkdir(parents=True, exist_ok=True)
    # Each file replaces the last run's only once complete: a failed write leaves the previous report readable.
    with replacing(out / "drift.json") as tmp:
        tmp.write_text(json.dumps(result.report, indent=2) + "\n")
    with replacing(out / "drift.html") as tmp:
        result.snapshot.save_html(str(tmp))
