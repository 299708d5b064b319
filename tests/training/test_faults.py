"""What a spot fleet does to a run, in real processes: early SIGTERM, a lost pod, an object store that goes away.

Each test fails on the code before issue 16: SIGTERM in the first seconds gave 143, a gloo peer reset gave 1,
a storage outage gave a traceback (1) with the newest checkpoint only in memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.emulators import MotoServer
from tests.training.picked_ports import (
    elastic_pod,
    held_port,
    run_on_fresh_port,
    smoke_training,
    start_store_host,
)
from training.errors import EXIT_OK, EXIT_PREEMPTED, EXIT_STORAGE

REPO = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _kill_tree(pid: int) -> None:
    """SIGKILL a process and everything under it (a pod's containers die together with their node)."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    for p in [*root.children(recursive=True), root]:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


def _wait(predicate, procs: list[subprocess.Popen], what: str, timeout: float = 300) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if any(p.poll() is not None for p in procs):
            raise AssertionError(f"a process exited ({[p.poll() for p in procs]}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.1)


# --------------------------------------------------------------------------- SIGTERM from the first second


@pytest.mark.integration
@pytest.mark.parametrize("offset_s", [1.0, 3.0, 8.0])
def test_sigterm_at_any_moment_after_start_exits_75(tmp_path: Path, offset_s: float) -> None:
    """Imports (~1-5 s), data and model loading (~5-10 s) or the loop: the pod always ends in 75."""
    proc = subprocess.Popen(
        smoke_training(tmp_path / "run", "export=false", "epochs=50"),
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    time.sleep(offset_s)
    assert proc.poll() is None, proc.communicate()[0][-2000:]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_PREEMPTED, (
        f"SIGTERM at {offset_s} s gave {proc.returncode}:\n{out[-3000:]}"
    )


# --------------------------------------------------------------------------- a lost peer (gloo, 2 pods)


def _pod(index: int, port: int, tmp: Path) -> subprocess.Popen:
    """One 'pod': training.elastic (torchrun) with one gloo worker, as the Job's container runs it."""
    shared_store = ("--checkpoint-uri", str(tmp / "ckpt"), "checkpoint.every_steps=5")
    worker = smoke_training(tmp / f"out{index}", *shared_store, "export=false", "epochs=40")
    cmd = elastic_pod(port, "lost-peer", worker, "--monitor_interval=1")
    with open(tmp / f"pod{index}.log", "ab") as log:
        return subprocess.Popen(
            cmd, cwd=tmp, env=_env(TRAINING_PG_TIMEOUT_S="30"), stdout=log, stderr=subprocess.STDOUT
        )


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("victim", [1, 0], ids=["worker-pod-lost", "rendezvous-host-pod-lost"])
def test_losing_a_pod_ends_every_surviving_pod_in_75(tmp_path: Path, victim: int) -> None:
    # Pod 0 hosts the c10d store (its endpoint is local): pod 1 starts once it listens, else pod 1 could host it.
    pod0, port = start_store_host(lambda p: _pod(0, p, tmp_path), tmp_path / "pod0.log")
    pods = [pod0, _pod(1, port, tmp_path)]
    try:
        _wait(lambda: (tmp_path / "ckpt" / "step-000000010" / "MANIFEST.json").exists(), pods, "checkpoint")
        _kill_tree(pods[victim].pid)
        survivor = pods[1 - victim]
        code = survivor.wait(timeout=240)
    finally:
        for p in pods:
            _kill_tree(p.pid)
    log = (tmp_path / f"pod{1 - victim}.log").read_text()
    assert code == EXIT_PREEMPTED, log[-4000:]
    assert "exiting 75" in log or "pod exits 75" in log, log[-4000:]


@pytest.mark.integration
@pytest.mark.parametrize("rank", [0, 1], ids=["peer-never-joins", "store-host-gone"])
def test_a_peer_lost_before_the_process_group_forms_exits_75(tmp_path: Path, rank: int) -> None:
    """Between torchrun's rendezvous and init_process_group's own barrier a spot node can go: rank 0 then waits
    for a client that never comes, the others for a store host that is gone. Exit 1 here failed the Job."""
    _peer_lost_before_the_process_group(tmp_path, rank)


@pytest.mark.integration
def test_a_store_port_another_process_took_is_replaced(tmp_path: Path, taken: int) -> None:
    """Rank 0 on a port another process holds fails to bind its store and exits 75 at once ("EADDRINUSE"): the
    test before passed on that exit without staging the lost peer at all."""
    assert _peer_lost_before_the_process_group(tmp_path, 0) != taken


def _peer_lost_before_the_process_group(tmp_path: Path, rank: int) -> int:
    """Runs `rank` of a 2-process group alone; returns MASTER_PORT."""
    env = _env(
        RANK=str(rank),
        LOCAL_RANK="0",
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1",
        TRAINING_PG_TIMEOUT_S="3",
    )
    cmd = smoke_training(tmp_path / "run", "export=false", "mlflow=false")

    def run(port: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            cmd,
            cwd=tmp_path,
            env={**env, "MASTER_PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=120,
        )

    if rank == 0:  # rank 0 hosts the store on MASTER_PORT: a port another process took is picked again
        proc, port = run_on_fresh_port(run)
        # The case staged, not the lost port (it exits 75 too, at once): rank 0 waited for its peer.
        assert "1/2 clients joined" in proc.stderr, proc.stderr[-3000:]
    else:
        with held_port() as port:  # nothing listens there (the store host is gone), and nothing else can
            proc = run(port)
    assert proc.returncode == EXIT_PREEMPTED, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "exiting 75 so the job reschedules" in proc.stderr
    return port


# --------------------------------------------------------------------------- the object store goes away


@pytest.mark.integration
@pytest.mark.slow
def test_store_outage_retries_keeps_the_checkpoint_locally_then_resumes(tmp_path: Path) -> None:
    import boto3

    from training import checkpoint as ckpt

    server = MotoServer()
    port, endpoint = server.port, server.endpoint
    env = _env(
        AWS_ENDPOINT_URL_S3=endpoint,
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="eu-south-2",
        # Several of our retries fit in it (random waits of at most 1 s at this budget); any longer only waits out
        # an outage the test keeps up for good (it was 15: 11 s more of the suite per run, nothing more proven).
        TRAINING_STORAGE_RETRY_S="4",
        # One attempt per call inside botocore, so the retries the test looks for are ours (tenacity).
        AWS_MAX_ATTEMPTS="1",
    )
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    s3.create_bucket(Bucket="ckpt", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"})
    out = tmp_path / "run"
    # 3 epochs (75 steps): the outage (after step 10) strikes over 60 steps before the end, and the rerun trains
    # the rest, checkpointing to the bucket every 5 steps; 6 epochs trained 75 more steps for the same proof.
    cmd = smoke_training(
        out, "--checkpoint-uri", "s3://ckpt/run", "export=false", "epochs=3", "checkpoint.every_steps=5"
    )

    def saved(step: int) -> bool:
        key = f"run/{ckpt.step_name(step)}/MANIFEST.json"
        return "Contents" in s3.list_objects_v2(Bucket="ckpt", Prefix=key)

    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        _wait(lambda: saved(10), [proc], "checkpoint step 10 in the bucket")
        server.stop()  # the store goes away mid-run and stays away
        log, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_STORAGE, log[-4000:]
    assert "retry" in log and "still failing after" in log, log[-4000:]
    rescued = ckpt.latest(ckpt.Store(str(out / "checkpoints-rescue")))
    # The outage can hit step 10's own save (its housekeeping after the upload) or a later one: either
    # way the newest complete checkpoint, at least step 10, must be kept locally.
    assert rescued is not None and rescued.step >= 10, f"no complete checkpoint kept locally:\n{log[-3000:]}"

    # The store comes back (same process: moto keeps its buckets); the rerun uploads the kept checkpoint
    # unless the outage struck after its upload, and resumes from it.
    server = MotoServer(port)  # raises if the port was taken meanwhile (ThreadedMotoServer waited forever)
    try:
        already_up = saved(rescued.step)
        again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == EXIT_OK, again.stderr[-4000:]
        assert f"resumed from s3://ckpt/run/{rescued.name}" in again.stderr, again.stderr[-4000:]
        expected = (
            "removing the local copy" if already_up else f"uploading {rescued.name}, kept on local disk"
        )
        assert expected in again.stderr, again.stderr[-4000:]
        assert ckpt.latest(ckpt.Store(str(out / "checkpoints-rescue"))) is None
        assert json.loads((out / "metrics.json").read_text())["steps"] == 3 * 25
    finally:
        server.stop()
