"""`python -m training.elastic` (the Job's PID 1) exits 75 on SIGTERM while it waits for the other nodes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port
from training.errors import EXIT_PREEMPTED

REPO = Path(__file__).resolve().parents[2]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.integration
def test_sigterm_during_the_rendezvous_wait_exits_75(tmp_path: Path) -> None:
    """A 2-node rendezvous with no peer (the GPU pool still scaling up): torchrun has no handler yet."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "training.elastic",
        "--nnodes=2",
        "--nproc_per_node=1",
        "--rdzv_backend=c10d",
    ]
    cmd += [f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=wait", "--rdzv_conf=join_timeout=120"]
    cmd += [
        "--max_restarts=0",
        "-m",
        "training",
        "train",
        "--preset",
        "smoke",
        "--output",
        str(tmp_path / "o"),
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):  # node 0 hosts the rendezvous store: it is now waiting for node 1
            assert proc.poll() is None, proc.communicate()[0][-2000:]
            assert time.monotonic() < deadline, "the rendezvous store never started"
            time.sleep(0.2)
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_PREEMPTED, (
        f"SIGTERM in the rendezvous gave {proc.returncode}:\n{out[-3000:]}"
    )
