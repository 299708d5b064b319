"""Stop a tritonserver whose starter died without stopping it (SIGKILL, the OOM killer, a crash).

serving/server.py runs this file as its own small process, in a session of its own, before it starts the
server: ``python -I watchdog.py WORKDIR SHM_PREFIX``, stdin a pipe whose only writer is the starter. The starter sends
the server's pid as one line, then never writes again; when it stops the server itself it kills this process
first. End of file on the pipe therefore means the starter is gone: the kernel closes a process's descriptors
however it ends, from whichever thread started the server. The server then gets what `TritonServer.stop`
would have sent: SIGINT (Triton drains, unloads its models and removes their shared memory), SIGKILL to its
process group after GRACE_S (its python backend stubs live there and can outlive it), and its temporary
folder and the stubs' shared memory are removed.

Why not PR_SET_PDEATHSIG on the server: it fires when the *thread* that forked exits (a server started from
a worker thread would die with that thread), it reaches the server only and not its stubs, and it sends one
signal with no grace period. A process in its own session is also out of reach of the signals sent to the
starter's process group (Ctrl-C, `timeout -s KILL`), which would otherwise take the watchdog down with it.

Standard library only: it runs isolated (-I), whatever the starter's environment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time

SHM_DIR = "/dev/shm"
GRACE_S = 15.0
"""Longer than the server's own --exit-timeout-secs (10 s) for in-flight requests."""


def alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie does not (a reaper that never reaps must not hold us for GRACE_S)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def stop(pid: int, grace_s: float = GRACE_S) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # the server if it hung, and the stubs it left in its group


def main(argv: list[str]) -> int:
    workdir, prefix = (argv[1] if len(argv) > 1 else ""), (argv[2] if len(argv) > 2 else "")
    line = sys.stdin.buffer.readline()
    if not line.strip():
        return 0  # the starter died before it started the server
    pid = int(line)
    sys.stdin.buffer.read()  # returns at end of file: the starter is gone
    stop(pid)
    if prefix:
        with contextlib.suppress(OSError):
            for region in os.listdir(SHM_DIR):
                if region.startswith(prefix):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(SHM_DIR, region))
    if workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    with contextlib.suppress(OSError):  # the starter's stderr may be a pipe nobody reads any more
        print(
            f"serving: the process that started tritonserver {pid} is gone; stopped the server",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
