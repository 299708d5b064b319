"""Command-line values checked before any work starts (argparse `type=` validators and output paths).

A bad value is exit 2 with a message naming the flag and the fix: found only after a server started or a
load sweep ran, it cost minutes (a report path that cannot be written lost the whole sweep).
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

from serving.errors import ServingError


def concurrency(value: str) -> list[int]:
    try:
        levels = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: use comma-separated integers, e.g. 1,8,32") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("concurrency levels must be >= 1")
    return levels


def count(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: use a whole number, e.g. 8 (0 turns it off)") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n}: must be >= 0 (0 turns it off)")
    return n


def positive_int(value: str) -> int:
    n = count(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n}: must be >= 1")
    return n


def port(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: use a port number, e.g. 8000") from None
    if not 0 <= n <= 65535:  # was an OverflowError traceback from bind()
        raise argparse.ArgumentTypeError(f"{n}: use a port in 1-65535 (0 picks a free one)")
    return n


def seconds(value: str) -> float:
    try:
        s = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: use a number of seconds, e.g. 10") from None
    if not (s > 0 and math.isfinite(s)):  # nan fails `> 0`; inf was an OverflowError from time.sleep
        raise argparse.ArgumentTypeError(f"{value}: must be a finite number of seconds > 0")
    return s


def expectation(value: str) -> tuple[str, str]:
    text, sep, label = value.rpartition("=")
    if not sep or not text or not label:
        raise argparse.ArgumentTypeError(f"{value!r}: use TEXT=LABEL, e.g. 'I love it=positive'")
    return text, label


def writable_file(path: Path, flag: str) -> None:
    """Refuse, before the work, an output path that cannot be written: a folder, a path under a file, a
    folder this user cannot write in. Creates the missing parent folders, as the write would."""
    fix = "pass a file path in a folder you can write to"
    if path.is_dir():
        raise ServingError(f"{flag} {path} is a folder: pass a file path, e.g. {path / 'report.json'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        above = next((p for p in path.parents if p.exists() and not p.is_dir()), path.parent)
        raise ServingError(f"{flag} {path}: {above} is a file, not a folder: {fix}") from None
    except OSError as exc:
        raise ServingError(f"{flag} {path}: cannot create {path.parent} ({exc.strerror}): {fix}") from None
    try:  # as the final write does (serving/manifest.py atomic_write): a temporary file beside the target
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"):
            pass
    except OSError as exc:
        raise ServingError(f"{flag} {path}: cannot write in {path.parent} ({exc.strerror}): {fix}") from None
