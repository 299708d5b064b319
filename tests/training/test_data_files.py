"""User data files as they come from spreadsheets and exporters: byte-order marks, other encodings, broken
quoting, JSONL lines that are not objects, float labels. Each is read or refused with a DataError (exit 2)
that names the fix, never a Python traceback (exit 1, which the Job treats as a crash)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from training import data
from training.config import DataConfig, RunConfig, apply_overrides
from training.errors import ConfigError, DataError

REPO = Path(__file__).resolve().parents[2]
BOM = b"\xef\xbb\xbf"


def _csv_bytes(rows: list[tuple[str, str]], encoding: str = "utf-8") -> bytes:
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf).writerows([("text", "label"), *rows])
    return buf.getvalue().encode(encoding)


def _load(path: Path, **kwargs: object) -> data.Dataset:
    return data.load(DataConfig(source=str(path), **kwargs), use_cache=False)  # type: ignore[arg-type]


def test_a_csv_with_a_byte_order_mark_reads_like_one_without(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    """Excel's "CSV UTF-8" starts with a BOM: it used to become part of the first column's name, and the
    user was told `missing column(s) text; found: text, label` (the BOM is invisible)."""
    plain, marked = tmp_path / "plain.csv", tmp_path / "excel.csv"
    plain.write_bytes(_csv_bytes(real_rows))
    marked.write_bytes(BOM + _csv_bytes(real_rows))
    assert _load(marked).manifest["splits"] == _load(plain).manifest["splits"]
    jsonl = tmp_path / "notepad.jsonl"
    jsonl.write_bytes(
        BOM + "".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in real_rows).encode()
    )
    assert _load(jsonl).manifest["splits"] == _load(plain).manifest["splits"]


@pytest.mark.integration
def test_a_bom_csv_in_a_bucket_is_read(tmp_path: Path, s3_env: str, real_rows) -> None:  # noqa: ANN001
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_env)
    s3.create_bucket(Bucket="bom-data", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"})
    s3.put_object(Bucket="bom-data", Key="excel.csv", Body=BOM + _csv_bytes(real_rows))
    ds = data.load(DataConfig(source="s3://bom-data/excel.csv"), use_cache=False)
    assert ds.manifest["rows"]["read"] == len(real_rows)


def test_latin1_bytes_in_a_utf8_read_name_data_encoding(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    path = tmp_path / "windows.csv"
    path.write_bytes(_csv_bytes([*real_rows, ("caf\u00e9 was lovely", "positive")], encoding="latin-1"))
    with pytest.raises(
        DataError, match=r"is not utf-8 text \(it holds the byte 0x[0-9a-f]{2}\).*data.encoding=latin-1"
    ):
        _load(path)
    assert _load(path, encoding="latin-1").manifest["rows"]["read"] == len(real_rows) + 1


def test_an_unknown_encoding_is_a_config_error() -> None:
    """It used to pass validation and crash in the reader with LookupError (exit 1)."""
    with pytest.raises(ConfigError, match=r"data.encoding: unknown encoding 'utf-9'"):
        apply_overrides(RunConfig(), ["data.encoding=utf-9"])
    assert apply_overrides(RunConfig(), ["data.encoding=cp1252"]).data.encoding == "cp1252"


@pytest.mark.parametrize("override", ["optim.lr=nan", "optim.lr=inf", "optim.weight_decay=nan"])
def test_nan_and_infinite_numbers_are_config_errors(override: str) -> None:
    """float('nan') compares False to everything: optim.lr=nan passed `<= 0` and crashed inside AdamW."""
    with pytest.raises(ConfigError, match=override.split("=")[0]):
        apply_overrides(RunConfig(), [override])


def test_an_unclosed_quote_points_at_its_line(tmp_path: Path) -> None:
    """A stray quote makes the csv module read the rest of the file as one field, past its 128 KiB limit."""
    path = tmp_path / "quote.csv"
    rows = [(f"review number {i} was fine", "positive") for i in range(10)]  # header + 10 lines
    tail = '"this review never closes its quote,positive\n' + "filler line,negative\n" * 8000
    path.write_bytes(_csv_bytes(rows) + tail.encode())
    with pytest.raises(DataError, match=r"CSV record starting on line 12 .*unclosed quote"):
        _load(path)


@pytest.mark.parametrize(("line", "kind"), [("[1, 2]", "list"), ("5", "int"), ('"text"', "str")])
def test_a_jsonl_line_that_is_not_an_object_is_named(tmp_path: Path, real_rows, line: str, kind: str) -> None:  # noqa: ANN001
    path = tmp_path / "d.jsonl"
    body = "".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in real_rows[:5])
    path.write_text(body + line + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"line 6 is a JSON {kind}, not an object"):
        _load(path)


def test_float_labels_in_a_csv_count_like_in_jsonl(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    """pandas writes a label column holding a NaN as 1.0/0.0: JSONL gave floats and loaded, CSV dropped all rows."""
    rows = [(t, "1.0" if lab == "positive" else "0.0") for t, lab in real_rows]
    path = tmp_path / "pandas.csv"
    path.write_bytes(_csv_bytes(rows))
    names = tmp_path / "names.csv"
    names.write_bytes(_csv_bytes(real_rows))
    assert _load(path).manifest["splits"] == _load(names).manifest["splits"]


@pytest.mark.integration
def test_the_cli_exits_2_with_the_fix_not_a_traceback(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    path = tmp_path / "windows.csv"
    path.write_bytes(_csv_bytes([*real_rows, ("na\u00efve but fun", "positive")], encoding="latin-1"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "training", "train", "--preset", "smoke", "--output", str(tmp_path / "run"),
         "--data", str(path), "export=false"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "is not utf-8 text" in done.stderr and "data.encoding=" in done.stderr


def test_a_record_with_more_or_fewer_fields_than_the_header_is_refused_naming_its_line(
    tmp_path: Path, real_rows
) -> None:  # noqa: ANN001
    """An unquoted comma shifted part of a text into the label (the row silently dropped as an unknown label);
    a bare line break (the corpus has a text with a CR in it) cut one row in two, the second half trained
    under the first's label. Both are now exit 2 naming the record's line."""
    good = _csv_bytes(real_rows).decode()
    last_line = len(
        list(io.StringIO(good, newline=""))
    )  # as the reader counts: quoted texts hold line breaks
    comma = tmp_path / "comma.csv"
    comma.write_text(good + "great flight, thanks,positive\r\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"line {last_line + 1} has 3 field\(s\), the header 2.*quoted"):
        _load(comma)
    broken = tmp_path / "linebreak.csv"
    broken.write_text(
        good.replace(f"{real_rows[4][0]},", f"{real_rows[4][0]}\rsecond half,", 1), encoding="utf-8"
    )
    with pytest.raises(DataError, match=r"line 6 has 1 field\(s\), the header 2"):
        _load(broken)


def test_a_semicolon_separated_file_is_named_as_such(tmp_path: Path, real_rows) -> None:  # noqa: ANN001
    path = tmp_path / "excel-de.csv"
    path.write_text(
        "text;label\r\n" + "".join(f'"{t}";{lab}\r\n' for t, lab in real_rows[:5]), encoding="utf-8"
    )
    with pytest.raises(DataError, match="header holds ';'.*save it comma-separated"):
        _load(path)
