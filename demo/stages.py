"""Running the demo's stages: numbered, timed, each with its own log, stopping at the first failure.

Each stage's commands run as subprocesses (the parts' own CLIs), their output streamed to
the console (indented) and to reports/demo/logs/<n>-<stage>.log, which is kept after a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

from localservers import stop_group

# What the stages start that `make setup` cannot install: {binary on PATH: Debian package}. tritonserver comes
# from the nvidia-pytriton wheel in .venv; Prometheus and Alertmanager (the monitor stage's alert delivery) do not.
SYSTEM_TOOLS = {"prometheus": "prometheus", "prometheus-alertmanager": "prometheus-alertmanager"}


def missing_tools() -> list[str]:
    """Each missing tool with how to get it; checked before the first stage, so a fresh machine learns it in
    a second instead of after the 4 minutes of training that precede the monitor stage."""
    missing = [
        f"{name} (apt-get install -y {pkg})" for name, pkg in SYSTEM_TOOLS.items() if not shutil.which(name)
    ]
    try:
        from serving.server import wheel_root

        wheel_root()
    except Exception as exc:  # noqa: BLE001 - reported, with the wheel's own message
        missing.append(f"tritonserver ({exc}; `make setup` installs it)")
    return missing


# Ctrl-C, CI cancelling the job (SIGTERM) and a closed terminal or dropped SSH session (SIGHUP): each stops the
# demo the same way. Only the first one interrupts: the ones after it must not cut short the stopping of what
# the demo started (Triton drains for up to 20 s, a training run checkpoints on SIGTERM), or the moto server,
# tritonserver and the rest, each in a session of its own, outlive the demo.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _note(text: str) -> None:
    # os.write, not print: a signal may arrive in the middle of a print (no re-entry into its buffer), and
    # after SIGHUP the terminal is gone.
    with suppress(OSError):
        os.write(2, text.encode())


def _stopping(signum: int, frame: FrameType | None) -> None:
    _note(f"demo: signal {signum} ignored: already stopping what it started\n")


def stopping() -> None:
    """From here on the demo only stops what it started: later signals are reported, not raised (a Ctrl-C while
    Triton drains after a failed stage skipped the moto server's stop and the summary)."""
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is _interrupt:
            signal.signal(sig, _stopping)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    stopping()
    _note(f"\ndemo: signal {signum}: stopping what it started (up to a minute)\n")
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """Within: the first of STOP_SIGNALS raises KeyboardInterrupt, the later ones are reported and ignored.
    A signal ignored on entry stays ignored (`nohup make demo` survives the hang-up it asked to survive). The
    previous handlers come back on leaving (in-process callers, tests). Main thread only, as Python's signal
    handlers are; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        sig: signal.signal(sig, _interrupt)
        for sig in STOP_SIGNALS
        if signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:  # None: set outside Python, cannot be put back from here
                signal.signal(sig, handler)


class StageFailed(Exception):
    def __init__(self, stage: str, log: Path, why: str) -> None:
        super().__init__(f"stage '{stage}' failed: {why} (log: {log})")
        self.stage, self.log, self.why = stage, log, why


@dataclass
class StageRecord:
    number: int
    name: str
    title: str
    log: Path
    status: str = "running"
    seconds: float = 0.0
    detail: str = ""

    def as_dict(self, root: Path) -> dict[str, Any]:
        log = os.path.relpath(self.log, root)
        return {"number": self.number, "name": self.name, "title": self.title, "status": self.status,
                "seconds": round(self.seconds, 1), "log": log, "detail": self.detail}  # fmt: skip


@dataclass
class Runner:
    """Owns the log folder, the stage list and the console output."""

    logs: Path
    total: int
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    stages: list[StageRecord] = field(default_factory=list)
    quiet: bool = False
    _current: StageRecord | None = None
    _log: IO[str] | None = None

    def say(self, text: str) -> None:
        with suppress(OSError):  # a closed terminal (SIGHUP) must not stop the stopping; the logs keep it all
            print(text, flush=True)

    @contextmanager
    def stage(self, name: str, title: str) -> Iterator[StageRecord]:
        self.logs.mkdir(parents=True, exist_ok=True)
        rec = StageRecord(len(self.stages) + 1, name, title, self.logs / f"{len(self.stages) + 1}-{name}.log")
        self.stages.append(rec)
        self.say(f"\n[{rec.number}/{self.total}] {title}")
        start = time.monotonic()
        with rec.log.open("w") as log:
            self._current, self._log = rec, log
            try:
                yield rec
            except StageFailed:
                rec.status = "failed"
                raise
            except KeyboardInterrupt:
                rec.status = "interrupted"
                raise
            except Exception as exc:  # a bug or an unexpected input: still name the stage and keep the log
                rec.status = "failed"
                log.write(f"\n{type(exc).__name__}: {exc}\n")
                raise StageFailed(name, rec.log, f"{type(exc).__name__}: {exc}") from exc
            else:
                rec.status = "ok"
            finally:
                rec.seconds = time.monotonic() - start
                self._current, self._log = None, None
        self.say(f"      done in {rec.seconds:.0f} s" + (f": {rec.detail}" if rec.detail else ""))

    def log(self, text: str) -> None:
        assert self._log is not None
        self._log.write(text + "\n")
        self._log.flush()

    def fail(self, why: str) -> None:
        assert self._current is not None
        self.log(f"FAILED: {why}")
        raise StageFailed(self._current.name, self._current.log, why)

    def run(
        self, cmd: Sequence[str], *, timeout_s: float, ok_codes: tuple[int, ...] = (0,), echo: bool = True
    ) -> int:
        """Run one command to completion, streaming its output; fail the stage on a bad exit code."""
        assert self._log is not None and self._current is not None
        shown = " ".join(cmd).replace(sys.executable, "python")
        self.log(f"$ {shown}")
        self.say(f"      $ {shown}")
        env = {**self.env, "PYTHONUNBUFFERED": "1"}
        # Own process group: a timeout kills the command and whatever it started.
        proc = subprocess.Popen(
            list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True,
            errors="replace",
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                self._log.write(line)
                if echo and not self.quiet:
                    with suppress(OSError):
                        sys.stdout.write("        " + line)
                        sys.stdout.flush()
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(cmd, timeout_s)
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stop_group(proc)
            self.fail(f"`{shown}` ran past {timeout_s:.0f} s")
        finally:
            if proc.poll() is None:
                stop_group(proc)
        self._log.flush()
        if code not in ok_codes:
            self.fail(f"`{shown}` exited {code}")
        return code
