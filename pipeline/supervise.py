"""The local runner's processes: each step in its own process group, stopped (and waited for) on SIGINT/SIGTERM;
WORK's lock, which names the run holding it."""

from __future__ import annotations

import codecs
import contextlib
import datetime as dt
import fcntl
import io
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any, TextIO

from promotion.deploy import group_alive, kill_group

LOCK = ".pipeline.lock"
"""WORK/.pipeline.lock: flock()ed by the run that uses WORK (and inherited by its steps), which it names."""
STOP_GRACE_S = 60.0
"""After the first SIGINT/SIGTERM the running step's process group has this long to stop (the trainer saves a
checkpoint first) before it is killed; a second signal kills it at once. So long, too, for the processes a step
that exited left in its group."""
POLL_S = 0.2
"""How often the runner looks whether a step whose output pipe is still open has exited."""


class Refused(ValueError):
    """The run's parameters or its WORK, refused before any step ran (the CLI's exit 2)."""


class WorkInUse(Refused):
    """Another run holds WORK's lock: two runs in one WORK train into one candidate and read each other's flags."""


def execute(cmd: Sequence[str], log: Path, echo: Callable[[str], None], stop: Stop, lock: int) -> int:
    """The step in its own process group, so that stopping it reaches whatever it started; it inherits WORK's
    lock, so a step that outlives a killed runner keeps the next run out until it ends.

    The step ends when its process exits, not when its output pipe closes: a process it left behind holding the
    pipe (a background `sleep`, a server it started) used to hang the run until that process ended. What it left
    in its group is stopped as an interrupted step is (`_stop_leftovers`), as a pod's processes end with it."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # Line-buffered: `tail -f WORK/logs/<step>.log` follows the step, and a killed runner's log keeps its end.
    with open(log, "w", encoding="utf-8", buffering=1) as f:
        # No stdin: outside the terminal's foreground group, a step reading it would be stopped (SIGTTIN) for good.
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
            process_group=0, pass_fds=(lock,), preexec_fn=_die_with_runner(),
        )  # fmt: skip
        assert proc.stdout is not None
        out = _Output(proc.stdout, f, echo)
        stop.attach(proc)
        try:
            while out.open and proc.poll() is None:
                out.pump(POLL_S)
            rc = proc.wait()  # the pipe closed first: the step closed its output and runs on
            out.drain()  # what the step wrote last, and the pipe's end when nothing else holds it
            _stop_leftovers(proc.pid, rc, out)
            return rc
        finally:
            out.close()
            stop.detach()


class _Output:
    """The step's output as it comes, line by line, read without blocking past `pump`'s timeout (the runner must
    see the step exit while another process still holds the pipe). Decoded as `text=True` pipes are (universal
    newlines: a progress bar's \r updates are lines), but an undecodable byte is replaced, not a traceback."""

    def __init__(self, pipe: IO[bytes], log: TextIO, echo: Callable[[str], None]) -> None:
        self._pipe, self._log, self._echo = pipe, log, echo
        os.set_blocking(pipe.fileno(), False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(pipe, selectors.EVENT_READ)
        decoder = codecs.getincrementaldecoder(locale.getpreferredencoding(False))(errors="replace")
        self._decoder = io.IncrementalNewlineDecoder(decoder, translate=True)
        self._partial = ""
        self.open = True

    def pump(self, timeout: float) -> None:
        """What the pipe holds within `timeout` seconds; `open` turns False at its end."""
        if not self.open or not self._selector.select(timeout):
            return
        try:
            data = os.read(self._pipe.fileno(), 65536)
        except BlockingIOError:
            return
        self._emit(self._decoder.decode(data, final=not data))
        if not data:
            self.close()

    def drain(self, limit_s: float = 1.0) -> None:
        """What the pipe holds now, up to its end; a writer still feeding it is not followed past `limit_s`."""
        deadline = time.monotonic() + limit_s
        while self.open and self._selector.select(0) and time.monotonic() < deadline:
            self.pump(0)

    def _emit(self, text: str) -> None:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self.line(line + "\n")

    def line(self, line: str) -> None:
        self._log.write(line)
        if not line.startswith(("train:", "Writing model shards")):  # progress bars stay in the log
            self._echo("     | " + line.rstrip())

    def close(self) -> None:
        """No more reading: a holder outside the step's group may keep the pipe; its later writes are its own."""
        if self._partial:
            self.line(self._partial)
            self._partial = ""
        if self.open:
            self.open = False
            self._selector.close()
            self._pipe.close()


def _stop_leftovers(pgid: int, rc: int, out: _Output) -> None:
    """The exited step's process group, whatever is left of it: SIGTERM, SIGKILL after STOP_GRACE_S; said in the
    step's log and output. Left running, it held the output pipe (the run hung on it) and WORK's lock (the next
    run was refused), unsignalled."""
    holding = out.open
    if not holding and not group_alive(pgid):
        return
    out.line(
        f"pipeline: the step exited ({rc}) but left processes in its process group {pgid}"
        f"{' holding its output open' if holding else ''}: SIGTERM, killed in {STOP_GRACE_S:.0f} s\n"
    )
    kill_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while (out.open or group_alive(pgid)) and time.monotonic() < deadline:
        if out.open:
            out.pump(POLL_S)
        else:
            time.sleep(POLL_S)
    kill_group(pgid, signal.SIGKILL)
    # What the killed wrote last; a holder that left the group (setsid) is not waited for.
    last = time.monotonic() + 1.0
    while out.open and time.monotonic() < last:
        out.pump(POLL_S)


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
        self._proc: subprocess.Popen[Any] | None = None
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
            # A step that has already exited was not told to stop: it finished (poll() never blocks, and says
            # None while the runner itself is reaping it: told, then). Its leftovers are stopped as usual.
            if self._proc.poll() is None:
                self._stop(self._proc)
            elif not first:  # a second signal: what the finished step left in its group, now
                kill_group(self._proc.pid, signal.SIGKILL)
        else:
            os.write(2, b"pipeline: second signal: killing the step\n")
            kill_group(self._proc.pid, signal.SIGKILL)

    def _stop(self, proc: subprocess.Popen[Any]) -> None:
        self.hit = True
        os.write(
            2,
            f"pipeline: {self.signal}: stopping the running step (process group {proc.pid}); killed in "
            f"{STOP_GRACE_S:.0f} s, or at once on a second signal\n".encode(),
        )
        kill_group(proc.pid, signal.SIGTERM)
        self._timer = threading.Timer(STOP_GRACE_S, kill_group, (proc.pid, signal.SIGKILL))
        self._timer.daemon = True
        self._timer.start()

    def attach(self, proc: subprocess.Popen[Any]) -> None:
        self.hit = False
        self._proc = proc
        if self.signal and not self.hit:  # it came while the step was starting
            self._stop(proc)

    def detach(self) -> None:
        proc, self._proc = self._proc, None
        if self._timer:
            self._timer.cancel()
        if self.hit and proc is not None:
            kill_group(proc.pid, signal.SIGKILL)  # whatever the stopped step left in its group


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
