"""The embedding's drift statistic: Evidently's model-based embedding drift (ModelDriftMethod), in one buffer.

Evidently's method labels the reference 1 and the current window 0, concatenates the two (reference first), splits
the rows in halves with `train_test_split(test_size=0.5, random_state=42)`, fits `SGDClassifier(loss="log_loss",
random_state=42)` on one half and returns the ROC AUC of its probabilities on the other. Called on DataFrames it
copies them several times per round (the target column, the concatenation, both halves, sklearn's C-order copy of
the training half), on top of sorted and shuffled copies of both windows: +588 MB at a day of 864,000 records.
Here the same steps run on one float64 buffer of the two windows' rows, filled per round from an index
permutation: the same sklearn calls on the same values in the same order and layout, so the same AUCs, +145 MB
(tests/monitoring/test_monitoring_embedding_drift.py compares them with Evidently's method on every run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def _canonical(frame: Any, columns: Sequence[str]) -> Any:
    """The positions of the frame's rows in lexicographic order of the columns (stable: what a mergesort
    `sort_values(columns)` gives), so that the AUCs are a function of the window's rows, not of the order
    concurrent requests logged them."""
    order = np.lexsort([frame[c].to_numpy(dtype=np.float64) for c in reversed(columns)])
    return order.astype(_index_type(len(frame)))


def _index_type(rows: int) -> Any:
    """Row ids in 4 bytes where they fit: every index array below is as long as the windows, one or two alive."""
    return np.int32 if rows < 2**31 else np.int64


def domain_classifier_aucs(current: Any, reference: Any, columns: Sequence[str], rounds: int) -> list[float]:
    """ROC AUC of Evidently's domain classifier on `rounds` splits of the rows, one per seed 0..rounds-1.

    Round `seed` is Evidently's ModelDriftMethod called on the rows of each window in canonical order, then
    permuted by `np.random.RandomState(seed).permutation` (what pandas' `sample(frac=1.0, random_state=seed)`
    draws): the method splits with a fixed seed, so the permutation gives each round its own split.
    """
    from sklearn.linear_model import SGDClassifier
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import train_test_split

    n_ref, n_cur, width = len(reference), len(current), len(columns)
    # Row ids into the two windows laid end to end, reference first (Evidently's concatenation).
    index = _index_type(n_ref + n_cur)
    ref_rows, cur_rows = _canonical(reference, columns), index(n_ref) + _canonical(current, columns)
    # float64 as Evidently's frames hold the columns: SGDClassifier fits float32 input in float32, other numbers.
    buffer = np.empty((n_ref + n_cur) * width, dtype=np.float64)
    aucs = []
    for seed in range(rounds):
        rows = np.concatenate(
            (
                ref_rows[np.random.RandomState(seed).permutation(n_ref)],
                cur_rows[np.random.RandomState(seed).permutation(n_cur)],
            )
        )
        train, test = train_test_split(rows, test_size=0.5, random_state=42, shuffle=True)
        del rows
        # Both halves are views of the buffer, laid out as sklearn gets them from Evidently's DataFrames: the
        # test half column-major (a DataFrame's to_numpy), the training half row-major (SGDClassifier's copy of
        # it), so the predictions are summed in the same order (row-major test rows change ~7 % of the probabilities
        # by an ulp, which can reorder two near-equal scores and move the AUC).
        x_test = buffer[: len(test) * width].reshape(width, len(test)).T
        x_train = buffer[len(test) * width :].reshape(len(train), width)
        for j, col in enumerate(columns):
            both = np.concatenate(
                (reference[col].to_numpy(dtype=np.float64), current[col].to_numpy(dtype=np.float64))
            )
            x_train[:, j], x_test[:, j] = both[train], both[test]
            del both
        # Reference 1, current 0, as Evidently labels them (int8: the labels' type changes no number).
        clf = SGDClassifier(loss="log_loss", random_state=42).fit(x_train, (train < n_ref).astype(np.int8))
        # Only the reference's column of predict_proba, contiguous: roc_auc_score would copy the strided column
        # while the two-column array is still alive.
        proba = np.ascontiguousarray(clf.predict_proba(x_test)[:, 1])
        aucs.append(float(roc_auc_score((test < n_ref).astype(np.int8), proba)))
        del train, test, proba
    return aucs
