"""The split as an auditor checks it: copies of a text (case, spacing, retweets) never on both sides, a text's
split independent of the other rows and of their order, the manifest hash moving only with the data that trains,
and resuming with other labels or the old split refused with the fix."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from training import checkpoint as ckpt
from training import data
from training.config import DataConfig
from training.errors import EXIT_OK, DataError


def write_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    import csv

    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([("text", "label"), *rows])
    return path


def _load(path: Path, **kwargs: object) -> data.Dataset:
    return data.load(DataConfig(source=str(path), **kwargs), use_cache=False)  # type: ignore[arg-type]


def _same_text(text: str) -> str:
    """The test's own idea of "the same text": what the uncased tokenizer cannot tell apart, minus a retweet."""
    return re.sub(r"^(rt @\w+: )+", "", " ".join(text.lower().split()))


def _copies(rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out = list(rows)
    for i, (text, label) in enumerate(rows):
        out.append(
            (text.upper() if i % 3 == 0 else f"  {text}  " if i % 3 == 1 else f"RT @fan{i}: {text}", label)
        )
    random.Random(1).shuffle(out)
    return out


def test_case_spacing_and_retweet_copies_never_straddle_the_split(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    """Exact duplicates were dropped, but "GREAT DAY" and "great day" (one input to the uncased tokenizer), or a
    tweet and its retweet, were cut apart about a third of the time (each copy its own row) and inflated held-out accuracy."""
    ds = _load(write_csv(tmp_path / "copies.csv", _copies(real_rows)))
    train = {_same_text(t) for t in ds.train.texts}
    for name in ("validation", "test"):
        held_out = [_same_text(t) for t in ds.splits[name].texts]
        assert held_out and not train & set(held_out), name
    assert ds.manifest["leakage"] == {"validation": 0, "test": 0}
    distinct = len({_same_text(t) for t, _ in real_rows})
    assert sum(len(s.texts) for s in ds.splits.values()) == distinct
    assert ds.manifest["rows"]["duplicates_dropped"] == 2 * len(real_rows) - distinct


def test_the_old_split_reports_its_leakage(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    ds = _load(write_csv(tmp_path / "copies.csv", _copies(real_rows)), split="shuffle")
    assert ds.manifest["leakage"]["test"] > 0 and ds.manifest["format_version"] == 1


def test_a_texts_split_does_not_depend_on_row_order_or_on_other_rows(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    """A retrain on last month's file plus new rows (or the same rows exported in another order) used to
    reshuffle everything: most of the new test rows had been training rows of the model it is compared with."""
    base = _load(write_csv(tmp_path / "a.csv", real_rows))
    shuffled = list(real_rows)
    random.Random(7).shuffle(shuffled)
    assert _load(write_csv(tmp_path / "b.csv", shuffled)).manifest["sha256"] == base.manifest["sha256"]
    grown = _load(
        write_csv(tmp_path / "c.csv", real_rows[:240] + [("one more row", "positive")] + real_rows[240:])
    )
    for name in ("train", "validation", "test"):
        assert set(base.splits[name].texts) <= set(grown.splits[name].texts), name
    # Row limits keep the same rows whatever the file's order.
    limited = {_load(tmp_path / n, max_train_rows=50).train.texts[0] for n in ("a.csv", "b.csv")}
    assert len(limited) == 1


def test_rows_the_run_drops_do_not_change_the_manifest_hash(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    """The pipeline retrains when the manifest hash changes: a row that trains nothing must not trigger it."""
    base = _load(write_csv(tmp_path / "a.csv", real_rows))
    noise = [("", "positive"), ("a text with a label the run does not know", "neutral"), real_rows[5]]
    more = _load(write_csv(tmp_path / "b.csv", real_rows + noise))
    assert more.manifest["rows"] != base.manifest["rows"]
    assert more.manifest["sha256"] == base.manifest["sha256"]
    relabelled = [(t, "positive" if i == 3 else lab) for i, (t, lab) in enumerate(real_rows)]
    assert _load(write_csv(tmp_path / "c.csv", relabelled)).manifest["sha256"] != base.manifest["sha256"]


def test_a_text_with_both_labels_is_dropped_whatever_comes_first(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    text = real_rows[0][0]
    shas = set()
    for first, second in (("negative", "positive"), ("positive", "negative")):
        ds = _load(
            write_csv(tmp_path / f"{first}.csv", [(text, first), (text.upper(), second), *real_rows[1:]])
        )
        assert ds.manifest["rows"]["conflicting_labels_dropped"] == 2
        assert all(_same_text(text) not in map(_same_text, s.texts) for s in ds.splits.values())
        shas.add(ds.manifest["sha256"])
    assert len(shas) == 1


def test_the_shuffle_split_reproduces_format_1_manifests(csv_file) -> None:  # noqa: ANN001
    """data.split=shuffle is the split of runs made before the hash split: same manifest hash as the code of
    98265ca computed for this file, so their checkpoints resume and monitoring can rebuild their reference."""
    ds = _load(csv_file(), split="shuffle")
    assert ds.manifest["sha256"] == "63f80b8a45d5a7f4249e30afa8fe69b4963ca9894a7cedfe23f1204d170533d9"
    assert "split" not in ds.manifest


def test_too_few_texts_or_one_label_in_train_name_the_counts_and_the_fix(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    with pytest.raises(
        DataError, match=r"distinct texts are too few .*test \d+, validation \d+, train \d+.*add rows"
    ):
        _load(write_csv(tmp_path / "tiny.csv", real_rows[:6]))
    # Positive rows only where the hash puts them in validation or test: train has one label.
    probe = _load(write_csv(tmp_path / "all.csv", real_rows))
    held_out_positive = [
        (t, "positive")
        for name in ("validation", "test")
        for t, lab in zip(probe.splits[name].texts, probe.splits[name].labels, strict=True)
        if lab == 1
    ]
    rows = [r for r in real_rows if r[1] == "negative"] + held_out_positive
    with pytest.raises(
        DataError, match=r"training split holds no rows of 'positive' \(test: negative \d+, positive \d+"
    ):
        _load(write_csv(tmp_path / "skewed.csv", rows))


SMALL = ["export=false", "baselines=false", "data.max_train_rows=48", "max_steps=3", "eval_every_steps=3"]


def test_resuming_with_other_labels_or_without_the_old_split_is_refused_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Class ids are positions in data.labels: a resume with them reordered would remap what the weights learnt.
    A checkpoint of a run made before the hash split (its config has no data.split) is refused with the
    override that resumes it, and resumes with it."""
    from training.cli import main

    out = tmp_path / "run"
    train = ["train", "--preset", "smoke", "--output", str(out), *SMALL]
    assert main([*train, "data.split=shuffle"]) == EXIT_OK
    store = ckpt.Store(str(out / "checkpoints"))
    found = ckpt.latest(store)
    trainer = json.loads(found.files["trainer.json"])
    trainer["state"]["finished"] = False
    del trainer["config"]["data"]["split"]  # as the code before the hash split saved it
    files = {**found.files, "trainer.json": json.dumps(trainer).encode()}
    ckpt.write_checkpoint(store, "step-000000004", files, meta={"step": 4})
    capsys.readouterr()
    assert main([*train, "data.split=shuffle", "data.labels=positive,negative"]) == 2
    assert "(data.labels negative,positive -> positive,negative)" in capsys.readouterr().err
    assert main([*train, "data.split=hash"]) == 2  # the default of every preset but smoke
    assert "add data.split=shuffle to resume it" in capsys.readouterr().err
    assert main([*train, "data.split=shuffle"]) == EXIT_OK
