"""Cutting the cleaned rows into test | validation | train, and the leakage check the manifest reports.

``data.split=hash`` (default, manifest format 2): rows are grouped by their normalised text
(``dedup_key``: Unicode NFKC, case-folded, whitespace collapsed, a leading retweet marker ``RT @user:``
removed), each group is one row, and a group's split is decided by the SHA-256 of ``data.seed`` and its key
alone. So a text and its copies (a retweet, a case- or spacing-only variant: the uncased tokenizer sees them
as one input) are never on both sides of the split; a text stays in the same split when rows are added,
removed or reordered (a retrain next month does not train on last month's test rows); and the rows of each
split are ordered by that hash, so ``data.max_*_rows`` keep the same rows whatever the file's row order.

``data.split=shuffle`` (manifest format 1) is the split of runs made before: exact duplicates dropped (the
first kept), a seeded shuffle, cut by position. It exists so a checkpoint or a manifest of such a run can be
resumed or reproduced; it leaks case-only and retweet copies across splits (``leakage`` in the manifest).
"""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from training.config import DataConfig
from training.errors import DataError

_RETWEET = re.compile(r"^(?:rt\s+@\w+:?\s*)+")
_SCALE = 1 << 64


@dataclass(frozen=True, slots=True)
class Split:
    texts: list[str]
    labels: list[int]


def dedup_key(text: str) -> str:
    """The form two rows must share to count as the same text (see the module docstring)."""
    key = " ".join(unicodedata.normalize("NFKC", text).casefold().split())  # = \s+ collapsed, then strip()
    return _RETWEET.sub("", key).strip() or key  # a bare "RT @user:" stays its own text


def _bucket(seed: int, key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}\x00{key}".encode()).digest()[:8], "big")


def hash_split(
    texts: Sequence[str], labels: Sequence[int], config: DataConfig, source: str
) -> tuple[dict[str, list[tuple[str, int]]], dict[str, int]]:
    groups: dict[str, list[tuple[str, int]]] = {}
    for text, label in zip(texts, labels, strict=True):
        groups.setdefault(dedup_key(text), []).append((text, label))
    keyed: list[tuple[int, str, str, int]] = []
    duplicates = conflicting = 0
    for key, members in groups.items():
        if len({label for _, label in members}) > 1:
            # Which label is right is unknowable here, and "the first row wins" made the data depend on row order.
            conflicting += len(members)
            continue
        duplicates += len(members) - 1
        # min(): the kept spelling must not depend on which copy comes first in the file.
        keyed.append((_bucket(config.seed, key), key, min(t for t, _ in members), members[0][1]))
    keyed.sort()
    test_edge = config.test_fraction * _SCALE
    val_edge = (config.test_fraction + config.val_fraction) * _SCALE
    cut: dict[str, list[tuple[str, int]]] = {"test": [], "validation": [], "train": []}
    for bucket, _, text, label in keyed:
        name = "test" if bucket < test_edge else "validation" if bucket < val_edge else "train"
        cut[name].append((text, label))
    _check_sizes(cut, len(keyed), config, source)
    return cut, {"duplicates_dropped": duplicates, "conflicting_labels_dropped": conflicting}


def shuffle_split(
    texts: Sequence[str], labels: Sequence[int], config: DataConfig, source: str
) -> tuple[dict[str, list[tuple[str, int]]], dict[str, int]]:
    seen: set[str] = set()
    rows: list[tuple[str, int]] = []
    duplicates = 0
    for text, label in zip(texts, labels, strict=True):
        if text in seen:
            duplicates += 1
            continue
        seen.add(text)
        rows.append((text, label))
    order = list(range(len(rows)))
    random.Random(config.seed).shuffle(order)  # stdlib PRNG: stable across numpy/torch versions
    n_test = max(1, round(len(rows) * config.test_fraction))
    n_val = max(1, round(len(rows) * config.val_fraction))
    if len(rows) - n_test - n_val < 2:
        raise DataError(source, f"{len(rows)} usable rows are too few to split into train/validation/test")
    cut = {
        "test": [rows[i] for i in order[:n_test]],
        "validation": [rows[i] for i in order[n_test : n_test + n_val]],
        "train": [rows[i] for i in order[n_test + n_val :]],
    }
    return cut, {"duplicates_dropped": duplicates}


def _check_sizes(cut: dict[str, list[tuple[str, int]]], n: int, config: DataConfig, source: str) -> None:
    empty = [name for name in ("test", "validation") if not cut[name]]
    if empty or len(cut["train"]) < 2:
        sizes = ", ".join(f"{name} {len(rows)}" for name, rows in cut.items())
        raise DataError(
            source,
            f"{n} distinct texts are too few to split into train/validation/test ({sizes} rows; each text's "
            "split is drawn from its hash with data.test_fraction and data.val_fraction): add rows",
        )


def leakage(splits: dict[str, Split]) -> dict[str, int]:
    """Held-out rows whose normalised text is also a training row: what inflates held-out accuracy."""
    train = {dedup_key(t) for t in splits["train"].texts}
    return {name: sum(dedup_key(t) in train for t in splits[name].texts) for name in ("validation", "test")}
