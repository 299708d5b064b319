"""Reading a user's CSV / JSONL / Parquet file into (text, label) rows (training/data.py cleans and splits them).

Every way a file can be unreadable (wrong encoding, a broken CSV record, a JSONL line that is not an object,
not Parquet, missing columns) is a DataError naming the fix: exit 2, not a traceback the Job counts as a crash.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from training.errors import DataError


class _CountingReader(io.RawIOBase):
    """Counts bytes pulled from the underlying (possibly remote) file."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return bool(getattr(self._raw, "seekable", lambda: False)())

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._raw.seek(offset, whence))

    def tell(self) -> int:
        return int(self._raw.tell())

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.count += n
        return n


def _text_encoding(encoding: str) -> str:
    """utf-8 reads as utf-8-sig: Excel's "CSV UTF-8" (and Notepad) start the file with a byte-order mark,
    which would otherwise glue itself to the first column's name and make that column "missing"."""
    return "utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding


def read_rows(
    uri: str, fmt: str, text_col: str, label_col: str, encoding: str
) -> tuple[list[tuple[Any, Any]], int]:
    import fsspec

    delimiter = "\t" if uri.lower().removesuffix(".gz").endswith(".tsv") else ","
    last_good = 0  # CSV: the line the last complete record ended on, to point at the broken one
    with fsspec.open(uri, "rb", compression="infer") as raw:
        counter = _CountingReader(raw)
        stream = io.BufferedReader(counter, buffer_size=1 << 20)
        try:
            if fmt == "csv":
                reader = csv.DictReader(
                    io.TextIOWrapper(stream, encoding=_text_encoding(encoding), newline=""),
                    delimiter=delimiter,
                )
                columns = reader.fieldnames or []
                _check_columns(uri, columns, text_col, label_col)
                last_good = reader.line_num
                rows = []
                for r in reader:
                    if None in r or r[text_col] is None or r[label_col] is None:
                        _misaligned(uri, r, len(columns), last_good + 1, delimiter)
                    rows.append((r[text_col], r[label_col]))
                    last_good = reader.line_num
            elif fmt == "jsonl":
                rows = []
                for lineno, line in enumerate(io.TextIOWrapper(stream, encoding=_text_encoding(encoding)), 1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DataError(
                            uri, f"line {lineno} is not JSON ({exc.msg}): expected one object per line"
                        ) from None
                    if not isinstance(obj, dict):
                        raise DataError(
                            uri,
                            f"line {lineno} is a JSON {type(obj).__name__}, not an object: expected one "
                            f'object per line, e.g. {{"{text_col}": "...", "{label_col}": "..."}}',
                        )
                    _check_columns(uri, list(obj), text_col, label_col, where=f"line {lineno}")
                    rows.append((obj[text_col], obj[label_col]))
            else:
                import pyarrow.parquet as pq

                try:
                    table = pq.read_table(stream)
                except Exception as exc:  # pyarrow raises several types for a non-Parquet file
                    raise DataError(uri, f"cannot be read as Parquet: {exc}") from None
                _check_columns(uri, table.column_names, text_col, label_col)
                rows = list(
                    zip(table.column(text_col).to_pylist(), table.column(label_col).to_pylist(), strict=True)
                )
        except UnicodeDecodeError as exc:
            raise DataError(
                uri,
                f"is not {encoding} text (it holds the byte 0x{exc.object[exc.start]:02x}): "
                "set data.encoding=... to the file's encoding (e.g. data.encoding=latin-1 or cp1252)",
            ) from None
        except csv.Error as exc:
            # A stray quote makes the reader swallow the rest of the file into one field.
            raise DataError(
                uri,
                f"CSV record starting on line {last_good + 1} cannot be parsed ({exc}): look for an "
                'unclosed quote there (a field starting with " must end with "), or a text over '
                f"{csv.field_size_limit()} characters",
            ) from None
        return rows, counter.count


def _misaligned(uri: str, record: dict[Any, Any], expected: int, line: int, delimiter: str) -> None:
    """A record with more or fewer fields than the header: its text and label are not where the header says.

    Read as it stands, an unquoted comma shifted part of the text into the label (the row was dropped as an
    unknown label) and a bare line break cut one row into two, the second trained under the first's label."""
    got = expected - sum(v is None for v in record.values()) + len(record.get(None) or [])
    raise DataError(
        uri,
        f"CSV record starting on line {line} has {got} field(s), the header {expected}: a text holding "
        f"{'a tab' if delimiter == chr(9) else 'a comma'} or a line break must be quoted "
        '("like, this"); fix that line (or drop it) and rerun',
    )


def _check_columns(uri: str, columns: Sequence[str], text_col: str, label_col: str, where: str = "") -> None:
    missing = [c for c in (text_col, label_col) if c not in columns]
    if missing:
        found = ", ".join(columns) if columns else "none (empty file?)"
        other = [d for d in ";|\t," if len(columns) == 1 and d in columns[0]]
        fix = (
            f"The header holds {other[0]!r}: the file is separated by it; save it comma-separated (.csv) "
            "or tab-separated (.tsv)"
            if other
            else "Set data.text_column=... and data.label_column=... to the right names."
        )
        raise DataError(
            uri,
            f"{where + ': ' if where else ''}missing column(s) {', '.join(missing)}; found: {found}. {fix}",
        )
