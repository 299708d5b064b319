"""One training run per output folder: OUTPUT/.train.lock, flock()ed by rank 0 for the whole run.

Two runs started into one --output (a second terminal, a retried step while the first still runs) both exited 0:
each pruned the other's checkpoints and best-<n> folders, one fell back to its last weights ("the recorded best
checkpoint ... is missing") and model/, metrics.json and export/ ended up from either run. The kernel drops a
flock with its holder, so a killed run leaves no stale lock and the rerun that resumes it is never refused.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import socket
from pathlib import Path

from training.errors import ConfigError

log = logging.getLogger("training")

LOCK = ".train.lock"


def acquire(output: Path) -> int | None:
    """The lock's file descriptor (close it to release); None where the filesystem has no flock (logged).

    Raises ConfigError (exit 2) naming the holder when another run holds it."""
    path = output / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = "another training run"
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            doc = json.loads(os.pread(fd, 4096, 0))
            holder = f"another training run (pid {doc['pid']} on {doc['host']}, started {doc['started']})"
        os.close(fd)
        raise ConfigError(
            "--output",
            f"{output} is in use by {holder}: two runs in one folder prune each other's checkpoints and "
            "overwrite each other's model and metrics. Wait until it ends (rerunning then resumes or re-reports "
            "it), or give this run its own --output",
        ) from None
    except OSError as exc:
        # Some network/FUSE filesystems implement no flock: train unguarded rather than not at all.
        os.close(fd)
        log.warning("cannot lock %s (%s): nothing stops a second run into the same --output", path, exc)
        return None
    holder_doc = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder_doc).encode(), 0)
    return fd


def release(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
