"""Finding what a demo run started, wherever it went: every process the demo starts inherits a marker
variable from the test, even in a session of its own and re-parented to init after the demo exited (which a
walk over the test's descendants would miss)."""

from __future__ import annotations

import contextlib

import psutil

from tests import leaks

MARKER = "EU_ML_DEMO_LEAK_CHECK"


def marked(marker: str) -> list[psutil.Process]:
    """Live (not zombie) processes carrying this run's marker in their environment."""
    return leaks.marked(marker, MARKER)


def kill_marked(marker: str) -> None:
    """What a failing run left behind, so that one failure does not leak servers into the next tests."""
    for proc in marked(marker):
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


def command_lines(marker: str, *, besides: int = 0) -> list[str]:
    """The command lines of the marked processes (but `besides`), for waiting on what a run has started."""
    lines = []
    for proc in marked(marker):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if proc.pid != besides:
                lines.append(" ".join(proc.cmdline()))
    return lines
