"""tune: the object store going away (exit 69) leaves the trial to this worker's rerun, as a preemption does.

Real processes and a real S3 API (moto's server): the first run finds nothing listening at the trials'
checkpoint endpoint, the rerun finds the store back. Before this test a trial that met exit 69 was marked FAIL
and the rerun started a new trial (its work lost, a failure counted in study.json).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.emulators import MotoServer
from tests.training.picked_ports import held_port
from tests.training.test_tune import ROOT, _cli, lr_space
from training.errors import EXIT_STORAGE


@pytest.mark.integration
def test_store_outage_leaves_the_trial_running_for_the_rerun(tmp_path: Path) -> None:
    import boto3

    out = tmp_path / "study"
    cmd = _cli(out, lr_space(tmp_path, [3e-3], epochs="1"), "--trials", "1", "--trial-timeout", "120")
    cmd += ["--worker", "w0", "--checkpoint-uri", "s3://tune-ckpt/study"]
    # The outage: nothing listens there during the first run, and no other process can start to meanwhile.
    with held_port() as port:
        endpoint = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "TRAINING_MLFLOW": "0",
            "AWS_ENDPOINT_URL_S3": endpoint,
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "eu-south-2",
            "TRAINING_STORAGE_RETRY_S": "2",
            "AWS_MAX_ATTEMPTS": "1",
        }
        first = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert first.returncode == EXIT_STORAGE, first.stdout + first.stderr[-3000:]
    assert "Traceback" not in first.stderr, first.stderr[-3000:]
    with sqlite3.connect(out / "study.db") as db:
        states = db.execute("SELECT number, state FROM trials").fetchall()
    assert states == [(0, "RUNNING")], states  # not FAIL: the rerun must find it

    # Released just before: MotoServer raises if another process took it in between (ThreadedMotoServer waited).
    server = MotoServer(port)
    try:
        boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing"
        ).create_bucket(Bucket="tune-ckpt", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"})
        second = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        server.stop()
    assert second.returncode == 0, second.stdout + second.stderr[-3000:]
    assert "resuming trial 0 left running by this worker" in second.stderr
    record = json.loads((out / "study.json").read_text())
    assert [(t["number"], t["state"]) for t in record["trials"]] == [(0, "COMPLETE")]
