"""Reading inference records (a file, or a prefix with date=YYYY-MM-DD partitions) into a DataFrame."""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from contextlib import closing
from typing import Any

from monitoring.errors import InputError
from monitoring.records import DESCRIPTORS, EMBEDDING

REQUIRED = ("prediction", "probability", *DESCRIPTORS, *EMBEDDING)


_PARTITION = re.compile(r"/date=(\d{4}-\d{2}-\d{2})/")
_DURATION = re.compile(r"^(\d+)([mhd])$")
CHUNK_ROWS = 1024
"""Records held as dicts at most this many at a time (~4 KB each) before they become a DataFrame's columns (~250 B
a record): the whole window as dicts peaked at ~4 KB a record (150,000 records: +613 MB RSS; a day of a team's
endpoint at 10 req/s is 864,000), past a 1 GiB pod's limit. Per chunk, pandas' per-call cost stays < 1 ms."""
TIME_FORMAT = "ISO 8601, e.g. 2026-12-03T10:00:00Z (a time without an offset is UTC)"


def parse_time(value: str, flag: str) -> Any:
    """An ISO 8601 time as a UTC pandas Timestamp; a bad value is an InputError naming the flag."""
    import pandas as pd

    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError):
        stamp = pd.NaT
    if pd.isna(stamp) or not re.match(r"^\d{4}-\d{2}-\d{2}", value.strip()):
        raise InputError(f"{flag} {value!r} is not a time: use {TIME_FORMAT}")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def window_start(window: str, now: Any = None) -> str:
    """--window 24h|90m|7d: the ISO start of the window ending now (the scheduled job's --since)."""
    import pandas as pd

    m = _DURATION.match(window.strip())
    if not m or int(m.group(1)) == 0:
        raise InputError(f"--window {window!r}: use a duration such as 90m, 24h or 7d")
    unit = {"m": "minutes", "h": "hours", "d": "days"}[m.group(2)]
    end = pd.Timestamp.now(tz="UTC") if now is None else now
    try:
        return str((end - pd.Timedelta(**{unit: int(m.group(1))})).isoformat())
    except (ValueError, OverflowError):  # pandas' OutOfBounds* errors are ValueErrors: a traceback, exit 1
        raise InputError(f"--window {window!r} reaches before the year 1677: use a shorter window") from None


def _unreadable(url: str, exc: Exception) -> InputError:
    """An object store that is down, refuses this job's identity or answers an error: exit 2 naming the URL.

    The SDKs under fsspec raise their own types (botocore's EndpointConnectionError and NoCredentialsError,
    aiohttp's ClientConnectorError, azure.core's errors), not OSError: uncaught they ended the job with a
    traceback and exit 1, which `--fail-on-drift` documents as "drift detected"."""
    return InputError(
        f"could not read {url}: {type(exc).__name__}: {exc}. Check the URL, that the object store is reachable "
        "and that this job's identity may read it"
    )


def _files(url: str, since: Any = None, until: Any = None) -> list[str]:
    import fsspec

    first_day = since.date().isoformat() if since is not None else None
    # The window's last day: a partition after it holds only records at or after `until`.
    last_day = until.date().isoformat() if until is not None else None
    try:
        fs, path = fsspec.core.url_to_fs(url)
        exists = fs.exists(path)
        if exists:
            files = [path] if fs.isfile(path) else sorted(_window_files(fs, path, first_day, last_day))
    except Exception as exc:  # noqa: BLE001 - any SDK's error type: see _unreadable
        raise _unreadable(url, exc) from exc
    if not exists:
        raise InputError(
            f"{url} does not exist: give a records file (.jsonl) or the prefix the records go to"
        )
    # A record is written at or after its ts, into the partition of its ts's date, so a date= partition outside
    # the window's days holds no record of it: the scheduled job reads its window, not the whole history.
    files = [
        f for f in files if (m := _PARTITION.search(f)) is None or _in_days(m.group(1), first_day, last_day)
    ]
    return [fs.unstrip_protocol(p) for p in files]


def _in_days(day: str, first_day: str | None, last_day: str | None) -> bool:
    return (first_day is None or day >= first_day) and (last_day is None or day <= last_day)


def _window_files(fs: Any, path: str, first_day: str | None, last_day: str | None) -> list[str]:
    """The .jsonl files under `path`, without listing the date= partitions outside the window.

    A year of records is ~365 partitions of hundreds of part files each: one recursive listing of the prefix
    (every key, a request per 1,000 on S3) was the nightly job's slowest step and grew with retention. The top
    level is listed once (a delimiter listing: one entry per partition) and only the window's partitions below it.
    """
    if first_day is None and last_day is None:
        return [p for p in fs.find(path) if p.endswith(".jsonl")]
    found: list[str] = []
    for entry in fs.ls(path, detail=True):
        name = entry["name"].rstrip("/")
        if entry["type"] != "directory":
            if name.endswith(".jsonl"):
                found.append(name)
            continue
        m = _PARTITION.search(name + "/")
        if m is not None and not _in_days(m.group(1), first_day, last_day):
            continue
        found.extend(p for p in fs.find(name) if p.endswith(".jsonl"))
    return found


def _lines(file: str) -> Generator[str, None, None]:
    """The lines of one records file, read one at a time: a window's file is never held whole beside its rows.

    Read errors (an SDK's, a byte sequence that is not UTF-8) become InputErrors naming the file; a generator, so
    the caller's own InputError for a bad line never passes through these handlers. Text mode ends a line at LF,
    CR LF or CR only, never at U+2028 and the other characters str.splitlines() breaks at, which a JSON string may
    hold (the line numbers are those the whole-file read and split gave). utf-8-sig: a file saved by an editor or
    tool that starts it with a byte order mark is read as the records it holds (json.loads refused line 1).
    """
    import fsspec

    try:
        with fsspec.open(file, "r", encoding="utf-8-sig") as fh:
            yield from fh
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{file} is not UTF-8 text ({exc.reason}): a truncated or foreign file, not records"
        ) from None
    except Exception as exc:  # noqa: BLE001 - any SDK's error type: see _unreadable
        raise _unreadable(file, exc) from exc


def _records(file: str, damaged: list[str] | None = None) -> Generator[dict[str, Any], None, None]:
    """The records of one JSON-lines file, one at a time; anything else in it is an InputError naming the file and
    line.

    With `damaged`, a last line that has no line end and is no JSON is skipped and named there as `file:line`
    instead: a writer killed part-way through a batch on a file system (a crashed pod on a volume) leaves one such
    line, and failing the job on it blinded the drift job for as long as that partition stayed in its window.
    Every other bad line is still an InputError."""
    # closing(): a bad line ends the read at once, and the file with it (not whenever the traceback is dropped).
    with closing(_lines(file)) as lines:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                if damaged is not None and not line.endswith("\n"):  # only the last line can lack its end
                    damaged.append(f"{file}:{lineno}")
                    continue
                raise InputError(
                    f"{file} line {lineno} is not JSON ({exc.msg}): records are JSON lines"
                ) from None
            if not isinstance(row, dict):
                raise InputError(
                    f"{file} line {lineno} is a JSON {type(row).__name__}, not an object: "
                    "records are one JSON object per line"
                )
            yield row


def _chunks(file: str, damaged: list[str] | None) -> Generator[Any, None, None]:
    """The records of one file as DataFrames of at most CHUNK_ROWS rows (pandas infers each column's type)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    with closing(_records(file, damaged)) as records:
        for row in records:
            rows.append(row)
            if len(rows) == CHUNK_ROWS:
                yield pd.DataFrame(rows)
                rows = []
    if rows:
        yield pd.DataFrame(rows)


def _select(chunk: Any, start: Any, end: Any) -> tuple[Any, int]:
    """The chunk's records with start <= ts < end, and how many have no ISO 8601 ts. A chunk without a ts column
    is kept whole: the window has no ts at all (not filtered, as before), or its rows count as lacking one."""
    import pandas as pd

    if "ts" not in chunk.columns:
        return chunk, len(chunk)
    # As instants, not strings: '...10:00:00.123+00:00' vs '...10:00:00Z', or another offset, compare right.
    ts = pd.to_datetime(chunk["ts"], utc=True, errors="coerce", format="ISO8601")
    keep = (ts >= start if start is not None else True) & (ts < end if end is not None else True)
    return chunk[keep], int(ts.isna().sum())


def load(
    url: str, *, since: str | None = None, until: str | None = None, damaged: list[str] | None = None
) -> Any:
    """All records under `url` with since <= ts < until (ISO 8601 times, compared in UTC; either may be None).

    `damaged`: collects the cut last lines skipped (see _records); without it they are InputErrors."""
    import pandas as pd

    start = parse_time(since, "--since") if since else None
    end = parse_time(until, "--until") if until else None
    if start is not None and end is not None and start >= end:
        raise InputError(f"--since {since} is not before --until {until}: an empty window")

    frames: list[Any] = []
    columns: dict[str, None] = {}  # an ordered set: the columns in the order they first appear
    total = bad_ts = 0
    for file in _files(url, start, end):
        for chunk in _chunks(file, damaged):
            total += len(chunk)
            columns |= dict.fromkeys(chunk.columns)
            if start is not None or end is not None:
                # Per chunk: the records outside the window are never held beside the others.
                chunk, bad = _select(chunk, start, end)
                bad_ts += bad
            if len(chunk):
                frames.append(chunk)
    if not total or not columns:  # lines of `{}` only: no records either
        raise InputError(f"{url}: no records found (is MONITORING_SAMPLE_RATE > 0, and the window right?)")
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise InputError(
            f"{url}: records lack {', '.join(missing)}: not inference records of this version "
            f"(expected the fields of monitoring/records.py RECORD_FIELDS)"
        )
    if "ts" in columns and (start is not None or end is not None):
        if bad_ts:
            raise InputError(
                f"{url}: {bad_ts} record(s) have no ISO 8601 ts: records are not of this version"
            )
        if not frames:
            raise InputError(
                f"{url}: no records between {since or 'the start'} and {until or 'now'}: empty window"
            )
    # Columns as one DataFrame of every record would have them: a column that was all null in one chunk (object)
    # and numbers or text in the others is inferred again over all its values (float64 with NaN, str); a field
    # only records outside the window had is kept, all null (NaN).
    frame = pd.concat(frames, ignore_index=True)
    return frame.reindex(columns=list(columns)).infer_objects()
