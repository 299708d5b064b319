"""The local runner's processes: each step in its own process group, stopped (and waited for) on SIGINT/SIGTERM;
WORK's lock, which names the run holding it."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

LOCK = ".pipeline.lock"
"""WORK/.pipeline.lock: flock()ed by the run that uses WORK (and inherited by its steps), which it names."""
STOP_GRACE_S = 60.0
"""After the first SIGINT/SIGTERM the running step's process group has this long to stop (the trainer saves a
checkpoint first) before it is killed; a second signal kills it at once."""


class Refused(ValueError):
    """The run's parameters or its WORK, refused before any step ran (the CLI's exit 2)."""


class WorkInUse(Refused):
    """Another run holds WORK's lock: two runs in one WORK train into one candidate and read each other's flags."""


def execute(cmd: Sequence[str], log: Path, echo: Callable[[str], None], stop: Stop, lock: int) -> int:
    """The step in its own process group, so that stopping it reaches whatever it started; it inherits WORK's
    lock, so a step that outlives a killed runner keeps the next run out until it ends."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # Line-buffered: `tail -f WORK/logs/<step>.log` follows the step, and a killed runner's log keeps its end.
    with open(log, "w", encoding="utf-8", buffering=1) as f:
        # No stdin: outside the terminal's foreground group, a step reading it would be stopped (SIGTTIN) for good.
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            process_group=0, pass_fds=(lock,), preexec_fn=_die_with_runner(),
        )  # fmt: skip
        assert proc.stdout is not None
        stop.attach(proc)
        try:
            for line in proc.stdout:
                f.write(line)
                if not line.startswith(("train:", "Writing model shards")):  # progress bars stay in the log
                    echo("     | " + line.rstrip())
            return proc.wait()
        finally:
            stop.detach()


def _die_with_runner() -> Callable[[], None] | None:
    """Linux: the step gets SIGTERM when the runner dies, even by SIGKILL (a kill of the runner's process group
    no longer reaches the step's own group)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    runner = os.getpid()

    def child() -> None:
        prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        if os.getppid() != runner:  # the runner died before that took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return child


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, sig)


class Stop:
    """SIGINT/SIGTERM during a run. The first stops the running step's process group (SIGTERM, SIGKILL after
    STOP_GRACE_S) and skips the steps after it; a second kills the step at once. The handler raises nothing while
    a step runs, so the runner always waits for the step it started and writes the record: a KeyboardInterrupt
    used to abandon the step on a second signal (left running, its output to a closed pipe) and could strike
    the record's own write."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self.hit = False
        """The running step was told to stop."""
        self._proc: subprocess.Popen[str] | None = None
        self._timer: threading.Timer | None = None

    def install(self) -> Callable[[], None]:
        """Handle SIGINT and SIGTERM (main thread only, as Python allows); returns what puts the old ones back."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}

        def restore() -> None:
            for sig, old in previous.items():
                signal.signal(sig, old)

        return restore

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = self.signal is None
        self.signal = self.signal or signal.Signals(signum).name
        if self._proc is None:
            if not first:  # no step running (the record being written): a second signal means now
                raise KeyboardInterrupt
        elif not self.hit:
            self._stop(self._proc)
        else:
            os.write(2, b"pipeline: second signal: killing the step\n")
            _kill_group(self._proc.pid, signal.SIGKILL)

    def _stop(self, proc: subprocess.Popen[str]) -> None:
        self.hit = True
        os.write(
            2,
            f"pipeline: {self.signal}: stopping the running step (process group {proc.pid}); killed in "
            f"{STOP_GRACE_S:.0f} s, or at once on a second signal\n".encode(),
        )
        _kill_group(proc.pid, signal.SIGTERM)
        self._timer = threading.Timer(STOP_GRACE_S, _kill_group, (proc.pid, signal.SIGKILL))
        self._timer.daemon = True
        self._timer.start()

    def attach(self, proc: subprocess.Popen[str]) -> None:
        self.hit = False
        self._proc = proc
        if self.signal and not self.hit:  # it came while the step was starting
            self._stop(proc)

    def detach(self) -> None:
        proc, self._proc = self._proc, None
        if self._timer:
            self._timer.cancel()
        if self.hit and proc is not None:
            _kill_group(proc.pid, signal.SIGKILL)  # whatever the stopped step left in its group


def lock(work: Path, run_id: str, started: dt.datetime) -> int:
    """WORK's lock (flock: the kernel drops it with its last holder, so a killed run leaves none behind)."""
    try:
        work.mkdir(parents=True, exist_ok=True)
        fd = os.open(work / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise Refused(f"--work {work}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = "another run (it has not said which yet)"
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            doc = json.loads(os.read(fd, 4096))
            holder = f"run {doc['run_id']} (pid {doc['pid']} on {doc['host']}, started {doc['started']})"
        os.close(fd)
        raise WorkInUse(
            f"--work {work} is in use by {holder}, or by a step it started: wait until it ends, or give this run "
            "its own --work (leaving --work out gives each run runs/pipeline/<run id>)"
        ) from None
    holder_doc = {
        "run_id": run_id,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": started.isoformat().replace("+00:00", "Z"),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder_doc).encode(), 0)
    return fd
