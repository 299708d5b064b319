"""`python -m serving serve` as a user runs it, for tests: started on picked ports, read until it says
"Ctrl-C", stopped whatever the test did.

The CLI leads its own process group, and its tritonserver has its own session (and a watchdog): a test that
fails before it stops the CLI leaves it to `localservers.stop_group`, whose SIGTERM `serve` handles like
Ctrl-C (it stops the server, then exits); a CLI stuck past the grace is SIGKILLed and its watchdog stops the
server.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from localservers import stop_group

_HTTP_LINE = re.compile(r"^\s+HTTP\s+http://(\S+)")


@dataclass
class ServeCli:
    proc: subprocess.Popen[str]
    lines: list[str]  # what it printed up to and including "Ctrl-C to stop."
    http_url: str  # host:port, as printed

    @property
    def http_port(self) -> int:
        return int(self.http_url.rsplit(":", 1)[1])


def _default_sigint() -> None:
    # A suite started as a background job (`cmd &`) runs with SIGINT ignored, which children inherit:
    # Python then never raises KeyboardInterrupt and the test would hang. Give the CLI the default a
    # user's terminal gives it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def serve_cli(repo: Path, grace_s: float = 60) -> Iterator[ServeCli]:
    """Run `serve` on `repo` (every port 0: picked by serve, and picked again if lost before the bind)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "serving", "serve", str(repo), "--http-port", "0", "--grpc-port", "0",
         "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, preexec_fn=_default_sigint,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # ends at EOF too: a CLI that exits before "Ctrl-C" fails below
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        urls = [m.group(1) for m in map(_HTTP_LINE.match, lines) if m]
        assert lines and lines[-1].startswith("Ctrl-C") and urls, "".join(lines) or f"exit {proc.wait()}"
        yield ServeCli(proc, lines, urls[0])
    finally:
        if proc.poll() is None:
            stop_group(proc, grace_s)
        if proc.stdout is not None:
            proc.stdout.close()
