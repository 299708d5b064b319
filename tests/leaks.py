"""The suite starts real servers (Triton, Prometheus, Alertmanager, moto, MLflow, registries, a Docker engine)
and must stop exactly what it starts. A process that outlives its starter is reparented to init and nobody
stops it: Triton's python backend stubs did, each holding a model, after every test that stopped a server while
it loaded. Every process the suite starts inherits a marker variable; at the end of the session any marked
process that is no longer a descendant of pytest is a leak: it is reported, killed, and fails the run.

Descendants still running are not counted: Python's own helpers (multiprocessing's resource tracker, torch's
compile workers) live as long as pytest does and exit with it.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid

import psutil

MARKER = "EU_ML_TEST_SESSION"


def mark_session() -> str:
    """Give this session's processes their marker (inherited through every exec, setsid and double fork)."""
    return os.environ.setdefault(MARKER, uuid.uuid4().hex)


def marked(marker: str, variable: str = MARKER) -> list[psutil.Process]:
    """Live (not zombie) processes whose environment has `variable` set to `marker`."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(variable) == marker:
                found.append(proc)
    return found


def orphans(marker: str) -> list[psutil.Process]:
    """Live processes carrying `marker` that are neither this process nor one of its descendants."""
    me = psutil.Process()
    ours = {me.pid, *(p.pid for p in me.children(recursive=True))}
    return [proc for proc in marked(marker) if proc.pid not in ours]


def leaked(marker: str, grace_s: float = 10.0) -> list[str]:
    """Orphans still alive after `grace_s` (a server's children may take a moment to exit after it), killed."""
    deadline = time.monotonic() + grace_s
    while (left := orphans(marker)) and time.monotonic() < deadline:
        time.sleep(0.5)
    lines = []
    for proc in left:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            lines.append(f"pid {proc.pid}: {' '.join(proc.cmdline())[:200]}")
            proc.kill()
    psutil.wait_procs(left, timeout=5)
    return lines
