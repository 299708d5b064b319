"""`python -m training.elastic` (the Job's PID 1) exits 75 on SIGTERM while it waits for the other nodes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import pick_first
from tests.training.picked_ports import elastic_pod, held_port, smoke_training, start_store_host, stop_tree
from training.errors import EXIT_PREEMPTED

REPO = Path(__file__).resolve().parents[2]


def _sigterm_in_the_rendezvous(tmp_path: Path) -> int:
    """A 2-node rendezvous with no peer (the GPU pool still scaling up): torchrun has no handler yet. Returns the
    port node 0 hosted the rendezvous store on."""
    log = tmp_path / "node0.log"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))

    def node0(port: int) -> subprocess.Popen:
        cmd = elastic_pod(port, "wait", smoke_training(tmp_path / "o"), "--rdzv_conf=join_timeout=120")
        with log.open("ab") as out:
            return subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)

    # Node 0 hosts the rendezvous store (its endpoint is local): listening there, it now waits for node 1.
    proc, port = start_store_host(node0, log)
    try:
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        stop_tree(proc)
    out = log.read_text(errors="replace")
    assert proc.returncode == EXIT_PREEMPTED, (
        f"SIGTERM in the rendezvous gave {proc.returncode}:\n{out[-3000:]}"
    )
    return port


@pytest.mark.integration
def test_sigterm_during_the_rendezvous_wait_exits_75(tmp_path: Path) -> None:
    _sigterm_in_the_rendezvous(tmp_path)


@pytest.mark.integration
@pytest.mark.parametrize("holder", ["taken", "stranger"])
def test_a_rendezvous_port_another_process_took_is_replaced(
    holder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """The first pick is held by a listener that never answers (torchrun waited on it silently, for good) or by
    another test's HTTP server (torchrun became its client): the run goes on from a fresh pick, node 0 hosting."""
    taken = request.getfixturevalue(holder)  # `taken` is handed out first by its fixture
    if holder == "stranger":
        pick_first(monkeypatch, taken)
    assert _sigterm_in_the_rendezvous(tmp_path) != taken


@pytest.mark.integration
@pytest.mark.slow
def test_a_rendezvous_port_bound_without_a_listener_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outgoing connection's ephemeral port (bound, refusing): torchrun says so only after its 60 s connect
    timeout; the run before gave up after 60 s with "the rendezvous store never started"."""
    with held_port() as taken:
        pick_first(monkeypatch, taken)
        assert _sigterm_in_the_rendezvous(tmp_path) != taken


@pytest.mark.integration
def test_a_store_that_cannot_be_reached_is_named_in_the_pods_last_words(tmp_path: Path) -> None:
    """A node whose rendezvous store never answers (the host's DNS record not yet published, the port held by
    another process): the pod exits 75 and says which host and port it could not reach (torch's own message only
    says "See inner exception for details")."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    with held_port() as port:
        worker = [sys.executable, "-m", "training", "env"]
        cmd = elastic_pod(port, "unreachable", worker, "--rdzv_conf=read_timeout=3,join_timeout=5")
        done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    (last,) = [line for line in done.stderr.splitlines() if line.startswith("training.elastic:")]
    assert done.returncode == EXIT_PREEMPTED, done.stderr[-3000:]
    assert "rendezvous or store lost" in last
    assert f"to connect to (127.0.0.1, {port})" in last, last
    assert "frame #" not in last  # torch's native stack stays out of the one line
