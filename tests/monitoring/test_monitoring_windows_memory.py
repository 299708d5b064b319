"""A window of records is read in bounded memory, into the frame one DataFrame of every record would give.

`windows.load` held every record of the window as a dict (~4 KB each) before building its frame (~250 B a record):
150,000 records peaked at +613 MB RSS, a day of a team's endpoint at 10 req/s (864,000 records) at +3.4 GB, past
the drift pod's limit. Records are now parsed CHUNK_ROWS at a time into frames, the window selected per chunk.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic_records import record

from monitoring import drift, windows
from monitoring.errors import InputError

REPO = Path(__file__).resolve().parents[2]


def test_a_window_is_read_without_a_dict_per_record(tmp_path: Path) -> None:
    rng = random.Random(3)
    for part in range(4):  # a partition of part files, as serving writes them
        folder = tmp_path / "records" / "date=2026-12-03"
        folder.mkdir(parents=True, exist_ok=True)
        rows = (record(part * 10_000 + i, rng) for i in range(10_000))
        (folder / f"part-{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "warm.jsonl").write_text("".join(json.dumps(record(i, rng)) + "\n" for i in range(20)))
    # Its own process, its peak RSS (Linux's VmHWM, reset once pandas, fsspec and json are warm) over its RSS before
    # the load: Arrow's string buffers and numpy's arrays included (tracemalloc sees neither of Arrow's).
    child = textwrap.dedent(f"""
        import json, re
        from monitoring import windows
        def kb(field):
            return int(re.search(field + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
        windows.load({str(tmp_path / "warm.jsonl")!r})
        before = kb("VmRSS")
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # the peak starts again from here
        frame = windows.load({str(tmp_path / "records")!r})
        print(json.dumps({{"rows": len(frame), "added_kb": kb("VmHWM") - before,
                           "frame_kb": int(frame.memory_usage(deep=True).sum()) // 1024}}))
    """)
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["rows"] == 40_000
    # Measured: the frame 10 MB; a dict for every record peaked at +164 MB, chunks at +23 MB (the chunks and their
    # concatenation, twice the frame, plus one chunk of dicts). The bound, 4x the frame, is 1.7x over the latter.
    assert got["added_kb"] < 4 * got["frame_kb"], got


def _one_frame(paths: list[Path], since: str | None, until: str | None) -> pd.DataFrame:
    """What load returned when it built one DataFrame of every record, then selected the window."""
    frame = pd.DataFrame([json.loads(line) for p in paths for line in p.read_text().splitlines()])
    if since or until:
        ts = pd.to_datetime(frame["ts"], utc=True, errors="coerce", format="ISO8601")
        keep = (ts >= pd.Timestamp(since) if since else True) & (ts < pd.Timestamp(until) if until else True)
        frame = frame[keep]
    return frame.reset_index(drop=True)


@pytest.mark.parametrize(
    ("since", "until"),
    [(None, None), ("2026-12-03T10:00:03Z", None), ("2026-12-03T10:00:02Z", "2026-12-03T11:00:09+01:00")],
)
def test_chunks_give_the_columns_and_types_of_one_frame_of_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, since: str | None, until: str | None
) -> None:
    monkeypatch.setattr(windows, "CHUNK_ROWS", 2)  # chunk boundaries inside each file
    rng = random.Random(4)
    rows = [record(i, rng) for i in range(12)]
    for row in rows[:2]:  # a chunk whose probability and model_version are all null (object, alone)
        row["probability"], row["model_version"] = None, None
    rows[5]["n_tokens"] = 7.5  # a float among ints: float64 over all of them
    del rows[7]["latency_ms"]  # a key some records lack: NaN there
    rows[8]["extra"] = "x"  # a key only a later record has: the last column
    rows[10]["ts"] = "2026-12-03T11:00:10+01:00"  # another offset: compared as an instant
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    paths[0].write_text("".join(json.dumps(r) + "\n" for r in rows[:5]))
    paths[1].write_text("".join(json.dumps(r) + "\n" for r in rows[5:]))
    want = _one_frame(paths, since, until)
    got = windows.load(str(tmp_path), since=since, until=until)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    # A field only records outside the window have: still a column, all null.
    assert windows.load(str(tmp_path), since="2026-12-03T10:00:09Z")["extra"].isna().all()


def test_records_without_ts_are_counted_over_every_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(windows, "CHUNK_ROWS", 2)
    rng = random.Random(5)
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(record(i, rng)) + "\n" for i in range(4)))
    lacking = [{k: v for k, v in record(i, rng).items() if k != "ts"} for i in range(3)]
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lacking))
    with pytest.raises(InputError, match=r": 3 record\(s\) have no ISO 8601 ts"):
        windows.load(str(tmp_path), since="2026-12-03T10:00:00Z")
    # A window without any ts is kept whole, as before.
    assert len(windows.load(str(tmp_path / "b.jsonl"), since="2026-12-03T10:00:00Z")) == 3
    (tmp_path / "c.jsonl").write_text("{}\n{}\n{}\n")
    with pytest.raises(InputError, match="no records found"):  # as one frame of `{}` rows (no column) was
        windows.load(str(tmp_path / "c.jsonl"))


def test_the_typed_frame_holds_no_copy_of_the_window(tmp_path: Path) -> None:
    """drift._prepare deep-copied the whole window (every column) before typing it: +1.7x the frame at its peak."""
    rng = random.Random(6)
    frame = pd.DataFrame([record(i, rng) for i in range(50)])
    typed = drift._prepare(frame, "current")
    assert list(typed.columns) == ["ts", *drift.COLUMNS, *drift.EMBEDDING]  # what drift reads, nothing else
    for col in ("probability", "unk_share", "emb_0", "emb_15"):  # already float64: shared, not copied
        assert np.shares_memory(typed[col].to_numpy(), frame[col].to_numpy()), col
    assert typed["truncated"].tolist() == ["0"] * 50 and typed["n_tokens"].dtype == "float64"
    # The caller's frame is unchanged.
    assert frame["truncated"].dtype == "int64" and frame["n_tokens"].dtype == "int64"
