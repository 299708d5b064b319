"""Reading inference records (a file, or a prefix with date=YYYY-MM-DD partitions) into a DataFrame."""

from __future__ import annotations

import json
from typing import Any

from monitoring.errors import InputError
from monitoring.records import DESCRIPTORS, EMBEDDING

REQUIRED = ("prediction", "probability", *DESCRIPTORS, *EMBEDDING)


def _files(url: str) -> list[str]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    if not fs.exists(path):
        raise InputError(
            f"{url} does not exist: give a records file (.jsonl) or the prefix the records go to"
        )
    files = [path] if fs.isfile(path) else sorted(p for p in fs.find(path) if p.endswith(".jsonl"))
    return [fs.unstrip_protocol(p) for p in files]


def load(url: str, *, since: str | None = None, until: str | None = None) -> Any:
    """All records under `url` with since <= ts < until (ISO 8601 UTC strings; either may be None)."""
    import fsspec
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for file in _files(url):
        with fsspec.open(file, "r", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InputError(
                        f"{file} line {lineno} is not JSON ({exc.msg}): records are JSON lines"
                    ) from None
    frame = pd.DataFrame(rows)
    if frame.empty:
        raise InputError(f"{url}: no records found (is MONITORING_SAMPLE_RATE > 0, and the window right?)")
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(
            f"{url}: records lack {', '.join(missing)}: not inference records of this version "
            f"(expected the fields of monitoring/records.py RECORD_FIELDS)"
        )
    if "ts" in frame.columns and (since or until):
        ts = frame["ts"].astype(str)
        keep = (ts >= since if since else True) & (ts < until if until else True)
        frame = frame[keep]
        if frame.empty:
            raise InputError(
                f"{url}: no records between {since or 'the start'} and {until or 'now'}: empty window"
            )
    return frame.reset_index(drop=True)
