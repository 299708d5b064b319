"""When a promotion lock's holder is provably gone, so the lock may be taken over without a person.

Provably gone means: the holder ran on this machine (same host name, same kernel boot, same pid namespace: a
container sharing the host name but not the pids proves nothing), its pid is not running (or runs a process that
started at another time: the pid was reused), and no process of its user still carries its lock id in its
environment (`PROMOTION_LOCK_ID`, inherited by the deploy and smoke commands it started: a SIGKILLed promotion
leaves its `pulumi up` running). Anything not readable proves nothing, and the lock is refused as before. There is
no lease: a deploy may run for half an hour, and object stores have no conditional overwrite for a heartbeat that
a takeover could not race. A holder on another machine (a CI runner that vanished, a lost node) still needs
`python -m promotion unlock`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from promotion.evidence import remove

ENV = "PROMOTION_LOCK_ID"
PROC = Path("/proc")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _start(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat); '' if not running."""
    stat = _read(PROC / str(pid) / "stat")
    return stat.rsplit(")", 1)[-1].split()[19] if stat else ""


def _pid_ns() -> str:
    try:
        return os.readlink(PROC / "self" / "ns" / "pid")
    except OSError:
        return ""


def identity() -> dict[str, Any]:
    """What the lock records so that a later run on the same machine can tell its holder is gone."""
    return {
        "boot_id": _read(PROC / "sys" / "kernel" / "random" / "boot_id"),
        "pid_namespace": _pid_ns(),
        "pid_start": _start(os.getpid()),
        "uid": os.getuid(),
    }


def _carriers(lock_id: str, uid: int, since: int) -> list[int] | None:
    """Pids of `uid`'s processes started since the holder (`since`, its start in ticks: only what it started can
    carry its id) whose environment holds the lock id; None if one of them could not be read."""
    marker = f"{ENV}={lock_id}".encode()
    found: list[int] = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid or int(_start(int(entry.name)) or 0) < since:
                continue
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (FileNotFoundError, ProcessLookupError):  # ended while we looked, or a kernel thread
            continue
        except OSError:
            return None
    return found


def gone(other: dict[str, Any]) -> str | None:
    """Why the lock's holder is provably gone, or None when that cannot be shown."""
    me = identity()
    pid, lock_id, uid = other.get("pid"), other.get("lock_id"), other.get("uid")
    if not (isinstance(pid, int) and isinstance(lock_id, str) and lock_id and isinstance(uid, int)):
        return None
    since = str(other.get("pid_start") or "")
    if not since.isdigit():
        return None
    if other.get("host") != socket.gethostname() or not me["boot_id"] or not me["pid_namespace"]:
        return None
    if other.get("boot_id") != me["boot_id"] or other.get("pid_namespace") != me["pid_namespace"]:
        return None
    start = _start(pid)
    if start and start == other.get("pid_start"):
        return None
    carriers = _carriers(lock_id, uid, int(since))
    if carriers is None or carriers:
        return None
    return f"its process is not running on this host{' (the pid was reused)' if start else ''} and nothing it started is left"


def remove_if_still(uri: str, lock_id: str, current_id: Callable[[], str | None]) -> bool:
    """Remove the lock if it still is `lock_id`'s. Runs that take over are on this machine (gone() says so), so a
    local file lock makes their read-compare-remove one step: two of them cannot both remove, the second would
    remove the first one's new lock."""
    name = hashlib.sha256(uri.encode()).hexdigest()[:24]
    with open(Path(tempfile.gettempdir()) / f"promotion-takeover-{name}.lock", "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if current_id() != lock_id:
            return False
        remove(uri)
        return True
