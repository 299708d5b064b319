"""Ports the training tests use, safe from another process taking them between the pick and the use.

A port picked free (localservers.free_port: bind port 0, release) is free only until someone binds it: another
test's server, or an outgoing connection's ephemeral port. Two uses, two answers:

- `held_port()`: an endpoint where nothing may listen (the store host is gone, the metadata server or the bucket
  is down). The test binds the port itself and never listens: a connection there is refused at once, and nobody
  else can bind it while the test holds it (a socket bound without SO_REUSEADDR blocks every other bind, and the
  kernel does not hand a bound port out as an ephemeral one).
- `start_store_host(start, log)`: a process that must host a c10d store on the port (torchrun's rendezvous store
  on its endpoint, rank 0's process-group store on MASTER_PORT), retried on a fresh pick when it lost the port.
  What loses look like (torch 2.13, tried with a socket held on the port): torchrun never reports it. The node
  that should host the store swallows the EADDRINUSE and becomes a client of whatever holds the port: a listener
  that never answers keeps it waiting silently (over 200 s), one that closes or refuses gets
  "TCP client failed to connect/validate to host 127.0.0.1:PORT" logged (at once, or after its 60 s connect
  timeout), then exit 75 "rendezvous or store lost" after 67-136 s: a test would read a preemption, or take the
  stranger's listener for its own store. Rank 0 of a process group logs "EADDRINUSE ... address already in use"
  and exits 75 within seconds. Anything else (an exit, a timeout) is the test's failure, reported as such.

The commands those processes run come from here too: `smoke_training(...)` (the smoke preset's trainer) and
`elastic_pod(...)` (`python -m training.elastic`, torchrun as the Job's pod runs it, on a c10d rendezvous).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

import localservers

ATTEMPTS = 3
LOOPBACK = "127.0.0.1"
TRAIN = [sys.executable, "-m", "training", "train", "--preset", "smoke"]


def smoke_training(output: Path, *overrides: str) -> list[str]:
    """`python -m training train --preset smoke --output OUTPUT [OVERRIDES...]` with this interpreter."""
    return [*TRAIN, "--output", str(output), *overrides]


def elastic_pod(port: int, rdzv_id: str, worker: list[str], *options: str, nnodes: int = 2) -> list[str]:
    """`python -m training.elastic`: one of `nnodes` pods with one worker, rendezvous (c10d) on LOOPBACK:`port`,
    no restarts (a lost peer ends the pod), then torchrun's other `options`; `worker` is a `python -m ...`
    command (its interpreter is torchrun's)."""
    return [
        sys.executable, "-m", "training.elastic", f"--nnodes={nnodes}", "--nproc_per_node=1",
        "--rdzv_backend=c10d", f"--rdzv_endpoint={LOOPBACK}:{port}", f"--rdzv_id={rdzv_id}", "--max_restarts=0",
        *options, *worker[1:],
    ]  # fmt: skip


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A loopback port bound by this test and not listened on, for as long as the block runs."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        yield int(sock.getsockname()[1])


def lost_port_said(output: str, port: int) -> bool:
    """Whether a store host's own output says another process holds `port`."""
    return "already in use" in output.lower() or f"to host {LOOPBACK}:{port}" in output


def run_on_fresh_port(
    run: Callable[[int], subprocess.CompletedProcess[str]],
) -> tuple[subprocess.CompletedProcess[str], int]:
    """`run(port)` (a process that hosts the store on `port` and exits, its output captured as text), run again on
    a fresh pick when it failed because another process had taken the port."""
    for _ in range(ATTEMPTS):
        port = localservers.free_port()
        done = run(port)
        if done.returncode == 0 or not lost_port_said(f"{done.stdout}{done.stderr}", port):
            return done, port
    raise AssertionError(
        f"each of {ATTEMPTS} ports picked was taken by another process:\n{done.stderr[-2000:]}"
    )


def start_store_host(
    start: Callable[[int], subprocess.Popen], log: Path, timeout_s: float = 120
) -> tuple[subprocess.Popen, int]:
    """`start(port)` (output appended to `log`) on a picked port; returned once the process (or a child) listens
    there. A port taken by another process: stopped and started again on a fresh pick. `timeout_s` covers the
    60 s torchrun waits before it says it could not connect to a port bound by a stranger that does not listen."""
    for _ in range(ATTEMPTS):
        port = localservers.free_port()
        seen = log.stat().st_size if log.exists() else 0
        proc = start(port)
        try:
            if _hosts(proc, port, log, seen, timeout_s):
                return proc, port
        except BaseException:
            stop_tree(proc)
            raise
        stop_tree(proc)
    raise AssertionError(f"each of {ATTEMPTS} ports picked was taken by another process:\n{_tail(log)}")


def _hosts(proc: subprocess.Popen, port: int, log: Path, seen: int, timeout_s: float) -> bool:
    """True once `proc` listens on `port`; False when it lost the port to another process; raises otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listening, connected = _sockets_on(proc.pid, port)
        if listening:
            return True
        # Checked before the exit: the process that lost the port exits 75 like a preempted one.
        with log.open("rb") as f:
            f.seek(seen)
            if lost_port_said(f.read().decode(errors="replace"), port):
                return False
        if connected:  # a client of whoever listens there (silently, when that one never answers)
            return False
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before listening on {port}:\n{_tail(log)}")
        time.sleep(0.1)
    raise AssertionError(f"did not listen on {port} within {timeout_s:.0f} s:\n{_tail(log)}")


def _sockets_on(pid: int, port: int) -> tuple[bool, bool]:
    """(listens on `port`, is connected to `port`) for `pid` and its descendants, each process seen at once."""
    listening = connected = False
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return False, False
    for proc in family:
        with contextlib.suppress(psutil.Error):
            conns = proc.net_connections("tcp")
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns):
                listening = True
            if any(c.raddr and c.raddr.port == port for c in conns):
                connected = True
    return listening, connected


def stop_tree(proc: subprocess.Popen) -> None:
    """SIGKILL `proc` and everything under it (torchrun's workers), then reap it."""
    with contextlib.suppress(psutil.NoSuchProcess):
        root = psutil.Process(proc.pid)
        for p in [*root.children(recursive=True), root]:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
    proc.wait()


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:] if log.exists() else "(no output)"
