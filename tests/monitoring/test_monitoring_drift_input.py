"""The drift job on records it cannot judge: a clear message and exit 2, never a traceback nor a verdict.

Found by running `python -m monitoring drift` on such windows: a NaN, infinite or null value in a numeric
column (json.dumps writes NaN/Infinity, json.loads reads them back) was dropped by Evidently without a word
(a window whose probabilities were one third NaN, or infinite, reported "drift not detected", exit 0); NaN in
an embedding column, records lacking a column some others have, or a null prediction ended in a scikit-learn
or Evidently ValueError traceback (exit 1, which `--fail-on-drift` documents as "drift detected"). A JSON
line that is not an object was reported as records lacking every field.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic_records import record, write

ROWS = 40


def broken(every: int = 3, **override: object) -> list[dict]:
    rng = random.Random(1)
    return [record(i, rng, **override) if i % every == 0 else record(i, rng) for i in range(ROWS)]


def without(column: str, first: int) -> list[dict]:
    rng = random.Random(2)
    rows = [record(i, rng) for i in range(ROWS)]
    for row in rows[:first]:
        del row[column]
    return rows


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(0)
    return write(tmp_path_factory.mktemp("ref") / "reference.jsonl", [record(i, rng) for i in range(200)])


def run_drift(ref: Path, cur: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "monitoring", "drift", "--reference", str(ref), "--current", str(cur),
         "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (broken(probability=float("nan")), "14 record(s) have a missing or non-finite value in column probability"),
        (broken(probability=float("inf")), "non-finite value in column probability"),
        (broken(probability=1.7), "outside [0, 1] in column probability"),
        (broken(n_tokens=None), "non-finite value in column n_tokens"),
        (broken(unk_share=-0.5), "outside [0, 1] in column unk_share"),
        (broken(emb_3=float("nan")), "non-finite value in column emb_3"),
        (without("emb_2", first=5), "5 record(s) have a missing or non-finite value in column emb_2"),
        (broken(every=1, prediction=None), "40 record(s) have no value in column prediction"),
        (broken(truncated=None), "no value in column truncated"),
    ],
    ids=["nan-probability", "inf-probability", "probability-1.7", "null-n_tokens", "negative-unk_share",
         "nan-embedding", "records-lacking-a-column", "null-prediction", "null-truncated"],
)  # fmt: skip
def test_a_window_with_values_no_record_holds_is_exit_2_naming_column_and_record(
    reference: Path, tmp_path: Path, rows: list[dict], expected: str
) -> None:
    done = run_drift(reference, write(tmp_path / "current.jsonl", rows), tmp_path / "out")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and expected in done.stderr, done.stderr
    assert "record 1 of 40, ts 2026-12-03T10:00:00Z" in done.stderr
    assert not (tmp_path / "out" / "metrics.prom").exists()  # no verdict is published


def test_a_broken_reference_is_refused_the_same_way(reference: Path, tmp_path: Path) -> None:
    bad = write(tmp_path / "reference.jsonl", broken(emb_0=float("nan")))
    done = run_drift(bad, reference, tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{bad}: 14 record(s) have a missing or non-finite value in column emb_0" in done.stderr


@pytest.mark.parametrize(("line", "kind"), [("42", "int"), ("[1, 2]", "list"), ('"text"', "str")])
def test_a_line_that_is_not_a_json_object_is_named_by_file_and_line(
    reference: Path, tmp_path: Path, line: str, kind: str
) -> None:
    rng = random.Random(3)
    cur = write(tmp_path / "current.jsonl", [record(i, rng) for i in range(ROWS)], first_line=line)
    done = run_drift(reference, cur, tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"current.jsonl line 1 is a JSON {kind}, not an object" in done.stderr


def test_a_file_cut_inside_a_character_is_named_not_a_traceback(reference: Path, tmp_path: Path) -> None:
    # A writer killed mid-append leaves half a UTF-8 sequence: was UnicodeDecodeError, exit 1.
    rng = random.Random(4)
    cur = write(tmp_path / "current.jsonl", [record(i, rng) for i in range(ROWS)])
    with cur.open("ab") as fh:
        fh.write('{"model": "caf\u00e9'.encode()[:-1])
    done = run_drift(reference, cur, tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "current.jsonl is not UTF-8 text" in done.stderr


def test_a_last_line_cut_by_a_killed_writer_is_skipped_counted_and_named(
    reference: Path, tmp_path: Path
) -> None:
    # A pod killed while it appended a batch to a volume leaves its last line without its end: that failed the
    # job (exit 2) for as long as the partition stayed in the window. A bad line anywhere else still does.
    rng = random.Random(5)
    cur = write(tmp_path / "current.jsonl", [record(i, rng) for i in range(ROWS)])
    with cur.open("a") as fh:
        fh.write(json.dumps(record(ROWS, rng))[:57])
    done = run_drift(reference, cur, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    named = f"skipped 1 cut last line(s) in the current records (a writer killed mid-write): file://{cur}:41"
    assert named in done.stderr, done.stderr
    report = json.loads((tmp_path / "out" / "drift.json").read_text())
    assert report["current"]["rows"] == ROWS
    assert (report["current"]["damaged_lines"], report["current"]["damaged"]) == (1, [f"file://{cur}:41"])
    assert report["reference"]["damaged_lines"] == 0
