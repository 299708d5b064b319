"""The pack process, started exactly as the Pulumi CLI starts a policy pack.

The pack's own virtualenv runs `python -u -m pulumi.policy <engine> <pack dir>` (which runs the pack's
__main__.py); the pack prints the port of its Analyzer gRPC server on stdout and blocks.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from policies.plans import Plan

PACK_DIR = Path(__file__).resolve().parent
PACK_PYTHON_ENV = "POLICY_PACK_PYTHON"
START_TIMEOUT_S = 60.0


class PackError(RuntimeError):
    """The pack process did not start or answer; the message carries its stderr."""


def pack_python() -> Path:
    override = os.environ.get(PACK_PYTHON_ENV)
    path = Path(override) if override else PACK_DIR / ".venv" / "bin" / "python"
    if not path.exists():
        raise PackError(
            f"the policy pack's virtualenv is missing ({path}): run `make setup` (or set {PACK_PYTHON_ENV} to a "
            "python with pulumi-policy installed)"
        )
    return path


@dataclass
class PackProcess:
    port: int
    process: subprocess.Popen[bytes]
    stderr_file: BinaryIO
    """The pack's stderr: a temporary file with no name (see `_anonymous_file`), read through this handle."""
    engine_address: str = "127.0.0.1:0"

    def stderr_tail(self, n: int = 4000) -> str:
        return _tail(self.stderr_file, n)

    def describe(self) -> str:
        """Which pack, run by which interpreter: what a user checks when it fails (`make setup`, the venv)."""
        args = [str(a) for a in self.process.args] if isinstance(self.process.args, list) else []
        where = f"{args[-1]} ({args[0]} -m pulumi.policy, pid {self.process.pid})" if args else ""
        return f"the policy pack {where}".rstrip()


def _anonymous_file() -> BinaryIO:
    """A temporary file that no kill can leave behind: it has no name in the temp folder (O_TMPFILE, or
    created and unlinked at once), so the kernel frees it when the last descriptor closes, even when the
    runner is SIGKILLed and no `finally` runs. The pack writes to it through its fd 2, the runner reads it
    back through this one."""
    return tempfile.TemporaryFile(prefix="policy-pack-", suffix=".stderr")


def _tail(file: BinaryIO, n: int) -> str:
    # pread, not seek + read: the pack's fd 2 shares this descriptor's file offset, and moving it would make
    # the pack write over what it wrote before.
    try:
        fd = file.fileno()
        size = os.fstat(fd).st_size
        return os.pread(fd, n, max(0, size - n)).decode(errors="replace")
    except (OSError, ValueError):  # ValueError: the file is already closed
        return ""


@contextmanager
def start_pack(
    plan: Plan,
    python: Path | None = None,
    *,
    pack_dir: Path = PACK_DIR,
    as_cli: bool = False,
    dry_run: bool = True,
) -> Iterator[PackProcess]:
    """Start the pack the way the CLI does and yield its port; always kill it afterwards.

    `as_cli=True` leaves out the offline gate's switch, so the pack behaves as under
    `pulumi preview --policy-pack` (undetermined checks and waived findings advisory, waivers applied by
    the pack itself); `dry_run=False` with it is the CLI's update-time run (`pulumi up`). `pack_dir` runs
    another copy of the pack (the publish test)."""
    python = python or pack_python()
    env = {
        **os.environ,
        "PULUMI_PROJECT": plan.project,
        "PULUMI_STACK": plan.stack,
        "PULUMI_DRY_RUN": "true" if dry_run else "false",
        # The CLI hands the pack the stack's config; the environment is the part the rules read.
        "PULUMI_CONFIG": json.dumps(
            {f"{plan.project}:environment": plan.environment} if plan.environment else {}
        ),
        "PYTHONUNBUFFERED": "1",
    }
    if not as_cli:
        # The offline gate fails closed: an undetermined check of a mandatory rule is a violation.
        env["POLICY_PACK_UNDETERMINED"] = "fail"
    env.pop("PYTHONPATH", None)  # the pack venv must find its own protobuf 5, not ours
    engine = "127.0.0.1:0"  # there is no engine offline; the SDK only uses it for logging
    err = _anonymous_file()
    try:
        proc = subprocess.Popen(
            [str(python), "-u", "-m", "pulumi.policy", engine, str(pack_dir)],
            cwd=pack_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            # SIGKILL of the runner runs no `finally`: the pack (a gRPC server that blocks until killed) was
            # left running under init. The kernel sends it SIGTERM when the runner dies, however it dies.
            preexec_fn=_die_with_runner(),
        )
    except BaseException:
        err.close()
        raise
    try:
        port = _read_port(proc, err)
        yield PackProcess(port, proc, err, engine)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        err.close()


def _die_with_runner() -> Callable[[], None] | None:
    """Linux: the pack gets SIGTERM when the runner dies, even by SIGKILL. The same few lines as
    pipeline/supervise.py's `_die_with_runner`, not imported from there: this folder is published on its own
    (tests/policies/test_policy_pack_modes.py refuses imports of the repository's other packages)."""
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


def _read_port(proc: subprocess.Popen[bytes], stderr: BinaryIO) -> int:
    line: list[bytes] = []
    reader = threading.Thread(
        target=lambda: line.append(proc.stdout.readline() if proc.stdout else b""), daemon=True
    )
    reader.start()
    reader.join(START_TIMEOUT_S)
    text = line[0].decode(errors="replace").strip() if line else ""
    # str.isdigit() took "²" and "99999": int() raised (exit 4) or the channel dialled no port and waited.
    if not (re.fullmatch(r"[0-9]{1,5}", text) and 0 < int(text) < 65536):
        proc.kill()
        proc.wait(timeout=10)  # its last words are in the file before they are read
        tail = _tail(stderr, 3000)
        raise PackError(
            f"the policy pack did not print its port (1-65535) within {START_TIMEOUT_S:.0f}s (got {text!r}):\n{tail}"
        )
    return int(text)


class Terminated(BaseException):  # noqa: N818 - BaseException: an `except Exception` on the way must not swallow it
    """SIGTERM arrived; raised so every `finally` (start_pack's kill of the pack) runs before the exit."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


@contextmanager
def stop_pack_on_sigterm() -> Iterator[None]:
    """Python dies of SIGTERM (CI cancelling a job, `timeout`, a supervisor) without running `finally`
    blocks, which left the pack (a gRPC server that blocks until killed) running, reparented to init.
    Raise instead, clean up, then die of the same signal (exit 143)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return

    def handler(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except Terminated as stop:
        signal.signal(stop.signum, signal.SIG_DFL)
        os.kill(os.getpid(), stop.signum)
        raise SystemExit(128 + stop.signum) from None  # only if the signal is blocked
    finally:
        signal.signal(signal.SIGTERM, previous)
