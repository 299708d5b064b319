"""A records file is read line by line: its whole text is never held beside the rows parsed from it.

windows._text read each file whole and split it, so a day's partition sat in memory twice over (the text, then
its lines) while its rows were built: about double the memory of streaming for a big window. The per-line
errors must still name the line, counted as before (LF, CR LF and CR end a line; U+2028 inside a string does not).
"""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path

import pytest
from synthetic_records import record

from monitoring import windows
from monitoring.errors import InputError


def test_reading_a_file_holds_no_copy_of_its_text(tmp_path: Path) -> None:
    rng = random.Random(5)
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(record(i, rng)) + "\n" for i in range(20_000)))
    size = path.stat().st_size
    # fsspec and json warmed up: their one-off allocations are not the file's.
    list(windows._records(str(path)))
    tracemalloc.start()
    try:
        rows = list(windows._records(str(path)))
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(rows) == 20_000
    # Whole-file reading peaks at the rows plus the text and its split lines (> 2 x size over what is kept);
    # streaming, at the rows plus one read buffer.
    assert peak - kept < size / 2, f"peak {peak - kept} bytes over the rows for a {size}-byte file"


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_bad_line_is_named_by_its_number_whatever_ends_the_lines(tmp_path: Path, newline: str) -> None:
    rng = random.Random(6)
    good = [json.dumps(record(i, rng)) for i in range(3000)]
    # U+2028 inside a JSON string: not a line break for JSON lines (str.splitlines() would break there).
    good[1] = json.dumps({**record(1, rng), "model": "a\u2028b"}, ensure_ascii=False)
    lines = [*good[:2000], "", "{not json", *good[2000:]]
    path = tmp_path / "records.jsonl"
    path.write_bytes(newline.join(lines).encode())
    with pytest.raises(InputError, match=r"records\.jsonl line 2002 is not JSON \("):
        list(windows._records(str(path)))
    path.write_bytes(newline.join([*good[:2000], "[1, 2]", *good[2000:]]).encode())
    with pytest.raises(InputError, match=r"line 2001 is a JSON list, not an object"):
        list(windows._records(str(path)))
    path.write_bytes(newline.join(good).encode())
    rows = list(windows._records(str(path)))
    assert len(rows) == 3000 and rows[1]["model"] == "a\u2028b"


def test_bytes_that_are_not_utf8_late_in_a_file_are_named_as_before(tmp_path: Path) -> None:
    rng = random.Random(7)
    path = tmp_path / "records.jsonl"
    path.write_bytes(
        "".join(json.dumps(record(i, rng)) + "\n" for i in range(5000)).encode()
        + '{"model": "caf\u00e9'.encode()[:-1]
    )
    with pytest.raises(InputError, match=r"records\.jsonl is not UTF-8 text \("):
        list(windows._records(str(path)))


def test_a_file_that_starts_with_a_byte_order_mark_is_read_as_its_records(tmp_path: Path) -> None:
    # A partition re-saved by an editor or a Windows tool: json.loads refused line 1 ("Unexpected UTF-8 BOM").
    rng = random.Random(8)
    path = tmp_path / "records.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + "".join(json.dumps(record(i, rng)) + "\r\n" for i in range(3)).encode()
    )
    rows = list(windows._records(str(path)))
    assert [r["ts"] for r in rows] == [record(i, random.Random(8))["ts"] for i in range(3)]


def test_only_a_last_line_without_its_end_is_set_aside_as_damaged(tmp_path: Path) -> None:
    rng = random.Random(9)
    good = [json.dumps(record(i, rng)) for i in range(3)]
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(good) + "\n" + good[0][:40])
    damaged: list[str] = []
    assert len(list(windows._records(str(path), damaged))) == 3 and damaged == [f"{path}:4"]
    with pytest.raises(InputError, match=r"records\.jsonl line 4 is not JSON"):  # without a list: as before
        list(windows._records(str(path)))
    # A cut line followed by more lines is no killed writer's: an error as before.
    path.write_text(good[0] + "\n" + good[1][:40] + "\n" + good[2] + "\n")
    with pytest.raises(InputError, match=r"records\.jsonl line 2 is not JSON"):
        list(windows._records(str(path), []))
