"""The trainer's progress stamp (issue 13, item 4: "a training job ... making no progress for N minutes").

A real Pushgateway (Debian's prometheus-pushgateway) receives what a real training run pushes; a real
Prometheus scrapes it with the repository's rules and the TrainingNoProgress alert reaches the local
webhook through a real Alertmanager for a stuck job only, not for a Job launched again under the name of
an older run whose stamp is still on the gateway. A run that ends deletes its group as its process exits; a
preempted one keeps it. A gateway that never answers costs the training loop nothing and is logged once. The
Job that `training launch` renders carries the settings.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from localservers import http_ok, start_on_free_port, stop_group
from monitoring import progress
from monitoring.localstack import LocalAlerting
from tests.httpd import http_server

GATEWAY = shutil.which("prometheus-pushgateway")
# Debian's build defaults --persistence.file to /var/lib/prometheus/pushgateway.data (upstream: empty, memory only):
# every gateway a test started without the flag loaded the groups earlier tests and runs had left there and wrote its
# own back. Empty: memory only, as the chart's image starts (infra/k8s/monitoring.py sets a file on its own volume).
MEMORY_ONLY = "--persistence.file="
ROOT = Path(__file__).resolve().parents[2]
SMALL = ["export=false", "baselines=false", "data.max_train_rows=160", "epochs=1", "max_steps=4"]


def read(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read().decode()


def gauge(body: str, name: str, job_name: str) -> float | None:
    """The value of `name` for this job_name on the gateway's /metrics (labels in any order)."""
    for line in body.splitlines():
        if line.startswith(name + "{") and f'job_name="{job_name}"' in line and 'job="ml-training"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if GATEWAY is None:
        pytest.skip(
            "prometheus-pushgateway is missing: apt-get install prometheus-pushgateway (.ci/run does)"
        )
    proc, port = start_on_free_port(
        lambda port: [str(GATEWAY), MEMORY_ONLY, f"--web.listen-address=127.0.0.1:{port}"],
        tmp_path_factory.mktemp("pushgateway") / "pushgateway.log", "pushgateway", http_ok("/-/ready"), timeout_s=30,
    )  # fmt: skip
    try:
        # A stamp left by an earlier run would be judged here as this module's (train-stuck, train-live, ...).
        assert "ml_training_" not in read(f"http://127.0.0.1:{port}/metrics"), (
            "the gateway started with old groups"
        )
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_group(proc, grace_s=10)


@pytest.fixture
def fresh_pusher(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The trainer's module-level pusher is built from the environment on its first mark: per test."""
    monkeypatch.setattr(progress, "_pusher", None)
    yield
    if progress._pusher is not None:
        progress._pusher.close()
        # The run's finish() hooked the delete on this test process's exit, when the gateway is long gone.
        atexit.unregister(getattr(progress._pusher, "at_exit", lambda: None))


@pytest.mark.integration
def test_a_real_training_run_pushes_its_progress_per_logged_step(
    gateway: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_pusher: None
) -> None:
    from training.cli import main

    monkeypatch.setenv("MONITORING_PUSHGATEWAY_URL", gateway)
    monkeypatch.setenv("MONITORING_JOB_NAME", "train-e2e")
    monkeypatch.setenv("TRAINING_MLFLOW", "0")
    started = time.time()
    assert (
        main(["train", "--preset", "smoke", "--output", str(tmp_path / "run"), *SMALL, "log_every_steps=2"])
        == 0
    )
    # The push is off the loop's thread: the last stamp arrives shortly after the step it reports.
    deadline, body = time.monotonic() + 20, ""
    while time.monotonic() < deadline and gauge(body, "ml_training_step", "train-e2e") != 4.0:
        time.sleep(0.2)
        body = read(f"{gateway}/metrics")
    assert gauge(body, "ml_training_step", "train-e2e") == 4.0, body[-2000:]
    stamp = gauge(body, "ml_training_last_progress_timestamp_seconds", "train-e2e")
    assert stamp is not None and started <= stamp <= time.time()
    assert progress._pusher.pushed >= 1 and progress._pusher.failed == 0
    assert progress._pusher.finished  # its loop ended: the group is deleted as the process exits (below)


@pytest.mark.integration
def test_the_alert_fires_for_a_stuck_job_only_from_the_pushed_series(gateway: str, tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

    # kube-state-metrics' view of the three Jobs (all active), pushed as it would be scraped. train-relaunched
    # was deleted and applied again a minute ago: its new pod pulls its image, the old run's stamp is a day old.
    now = time.time()
    registry = CollectorRegistry()
    labels = ["namespace", "job_name"]
    active = Gauge("kube_job_status_active", "stub of kube-state-metrics", labels, registry=registry)
    started = Gauge("kube_job_status_start_time", "stub of kube-state-metrics", labels, registry=registry)
    for job, start in (
        ("train-stuck", now - 7200),
        ("train-live", now - 7200),
        ("train-relaunched", now - 60),
    ):
        active.labels(namespace="training", job_name=job).set(1)
        started.labels(namespace="training", job_name=job).set(start)
    push_to_gateway(gateway, job="kube-state-metrics", registry=registry, timeout=5)
    stuck = progress.ProgressPusher(gateway, "train-stuck")
    stuck.mark(120, now=now - 3600)  # its last logged step was an hour ago
    live = progress.ProgressPusher(gateway, "train-live")
    live.mark(5000)
    old_run = progress.ProgressPusher(gateway, "train-relaunched")
    old_run.mark(9000, now=now - 86400)
    for pusher in (stuck, live, old_run):
        pusher.close()
    assert (stuck.pushed, live.pushed, old_run.pushed) == (1, 1, 1)

    host = gateway.removeprefix("http://")
    with LocalAlerting(tmp_path / "alerting", metrics_dirs=[], scrape_targets=[host]) as stack:
        alert = stack.wait_for("TrainingNoProgress", timeout_s=90)
        assert alert is not None, (tmp_path / "alerting" / "prometheus.log").read_text()[-2000:]
        assert alert["labels"]["job_name"] == "train-stuck"
        assert (alert["labels"]["severity"], alert["labels"]["owner"]) == ("warning", "ml")
        assert "made no progress" in alert["annotations"]["summary"]
        firing = read(f"{stack.prometheus_url}/api/v1/alerts")
    assert '"job_name":"train-stuck"' in firing and '"job_name":"train-live"' not in firing
    assert '"job_name":"train-relaunched"' not in firing, firing


def _train(out: Path, gateway: str, job_name: str, *overrides: str) -> subprocess.Popen:
    """`python -m training train` as the Job's container runs it: its own process, whose exit runs the delete."""
    env = {**os.environ, "MONITORING_PUSHGATEWAY_URL": gateway, "MONITORING_JOB_NAME": job_name,
           "TRAINING_MLFLOW": "0"}  # fmt: skip
    command = [
        sys.executable,
        "-m",
        "training",
        "train",
        "--preset",
        "smoke",
        "--output",
        str(out),
        *overrides,
    ]
    return subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)


@pytest.mark.integration
def test_a_finished_run_deletes_its_group_as_it_exits_and_a_preempted_one_keeps_it(
    gateway: str, tmp_path: Path
) -> None:
    other = progress.ProgressPusher(gateway, "train-other")  # another Job's group: never touched
    other.mark(7)
    other.close()
    # Preempted mid-loop: exit 75, and the retry resumes and stamps again under the same name.
    long = _train(tmp_path / "preempted", gateway, "train-preempted", *SMALL[:2], "epochs=50",
                  "checkpoint.every_steps=2", "log_every_steps=1")  # fmt: skip
    finished = _train(tmp_path / "finished", gateway, "train-finished", *SMALL, "log_every_steps=1")
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "preempted").glob("checkpoints/step-*/MANIFEST.json")):
            assert time.monotonic() < deadline and long.poll() is None, "the long run saved no checkpoint"
            time.sleep(0.05)
        os.kill(long.pid, signal.SIGTERM)
        assert long.wait(timeout=120) == 75
        assert finished.wait(timeout=180) == 0
    finally:
        for proc in (long, finished):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    body = read(f"{gateway}/metrics")
    assert gauge(body, "ml_training_step", "train-preempted") is not None, body[-2000:]
    assert gauge(body, "ml_training_last_progress_timestamp_seconds", "train-finished") is None, body[-2000:]
    assert gauge(body, "ml_training_step", "train-finished") is None
    assert gauge(body, "ml_training_step", "train-other") == 7.0


@pytest.mark.integration
def test_the_exit_hook_deletes_only_a_finished_runs_group(gateway: str) -> None:
    done, again = (
        progress.ProgressPusher(gateway, "train-done"),
        progress.ProgressPusher(gateway, "train-again"),
    )
    for pusher in (done, again):
        pusher.mark(10)
        deadline = time.monotonic() + 10
        while pusher.pushed < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        pusher.finish()
        atexit.unregister(pusher.at_exit)  # run here, not at this test process's exit
    assert gauge(read(f"{gateway}/metrics"), "ml_training_step", "train-done") == 10.0
    again.mark(11)  # a later run in the same process under that name: its stamp must stay
    for pusher in (done, again):
        pusher.at_exit()
    again.close()
    body = read(f"{gateway}/metrics")
    assert done.deleted and gauge(body, "ml_training_step", "train-done") is None
    assert not again.deleted and gauge(body, "ml_training_step", "train-again") == 11.0


def test_a_gateway_gone_at_exit_costs_a_log_line_never_the_run(caplog: pytest.LogCaptureFixture) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    pusher = progress.ProgressPusher(url, "train-x", timeout_s=0.5)
    pusher.finish()
    atexit.unregister(pusher.at_exit)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="monitoring.progress"):
        pusher.at_exit()
    assert time.monotonic() - started < 5 and not pusher.deleted
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "monitoring.progress"]
    assert f"curl -X DELETE {url}/metrics/job/ml-training/job_name/train-x" in warning


class _Silent(BaseHTTPRequestHandler):
    """A gateway that accepts and never answers (the worst case: a hung node, not a refused port)."""

    def do_PUT(self) -> None:  # noqa: N802 - http.server's name
        time.sleep(30)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.integration
def test_a_hung_gateway_never_slows_or_fails_training_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with http_server(_Silent) as served:
        pusher = progress.ProgressPusher(served.url, "train-x", timeout_s=0.5)
        done = threading.Event()

        def loop() -> None:  # the training loop's side: 2,000 logged steps
            for step in range(2000):
                pusher.mark(step)
            done.set()

        with caplog.at_level(logging.WARNING, logger="monitoring.progress"):
            threading.Thread(target=loop, daemon=True).start()
            # Each push waits up to 0.5 s on the hung gateway; the marks do not wait for it at all.
            assert done.wait(timeout=20), "mark() blocked on a hung Pushgateway"
            deadline = time.monotonic() + 10
            while pusher.failed < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
                pusher.mark(3000)
            pusher.close(timeout_s=2)
    assert pusher.failed >= 2 and pusher.pushed == 0
    warnings = [r for r in caplog.records if r.name == "monitoring.progress"]
    assert len(warnings) == 1 and "failed" in warnings[0].getMessage()


def test_off_without_a_gateway_or_job_name() -> None:
    assert isinstance(progress.from_environment({}), progress._Off)
    assert isinstance(
        progress.from_environment({"MONITORING_PUSHGATEWAY_URL": "http://x:9091"}), progress._Off
    )


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_the_rendered_training_job_points_the_trainer_at_the_stacks_pushgateway(cloud: str) -> None:
    from infra.k8s.monitoring import PUSHGATEWAY_URL
    from training.launch import LaunchConfig, render_job

    # launch refuses a checkpoint bucket of another cloud (the aws default on gcp/azure).
    uri = {"aws": "s3://b/r", "gcp": "gs://b/r", "azure": "az://c@acct.blob.core.windows.net/r"}[cloud]
    job = render_job(LaunchConfig(name="sentiment-7", cloud=cloud, checkpoint_uri=uri))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    # The Service every stack's Prometheus chart runs (infra), and the Job's own name: the label that
    # kube-state-metrics' kube_job_status_active{job_name} carries, which the rule joins on.
    assert env["MONITORING_PUSHGATEWAY_URL"] == PUSHGATEWAY_URL
    assert env["MONITORING_JOB_NAME"] == job["metadata"]["name"] == "sentiment-7"
    assert re.fullmatch(r"[a-z0-9-]+", env["MONITORING_JOB_NAME"])
    off = render_job(LaunchConfig(name="sentiment-7", cloud=cloud, checkpoint_uri=uri, pushgateway_url=None))
    names = {e["name"] for e in off["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert not names & {"MONITORING_PUSHGATEWAY_URL", "MONITORING_JOB_NAME"}
