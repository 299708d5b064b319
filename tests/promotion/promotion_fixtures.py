"""Fixture evidence for the promotion tests: a passing candidate, written as the real producers write it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from localservers import http_ok, start_on_free_port

MANIFEST_SHA = "a" * 64
DIGEST_T = "sha256:" + "1" * 64
DIGEST_S = "sha256:" + "2" * 64


def metrics(accuracy: float = 0.88, tfidf: float = 0.83) -> dict[str, Any]:
    return {
        "test": {"accuracy": accuracy, "f1": accuracy - 0.02, "auc": 0.93},
        "validation": {"accuracy": accuracy + 0.005, "f1": 0.85, "auc": 0.94},
        "baselines": {
            "majority": {"accuracy": 0.70, "f1": 0.0, "auc": 0.5},
            "tfidf_logreg": {"accuracy": tfidf, "f1": 0.78, "auc": 0.89},
        },
        "beats_tfidf": accuracy > tfidf,
        "train_samples_per_s": 26.0,
        "epochs_run": 1,
        "steps": 94,
        "history": [{"step": 10, "epoch": 0, "loss": 0.6, "lr": 5e-5}],
        "dataset_manifest_sha256": MANIFEST_SHA,
    }


def bundle_metadata() -> dict[str, Any]:
    return {
        "format_version": 1,
        "model_name": "all-MiniLM-L6-v2",
        "max_length": 64,
        "opset": 18,
        "dataset_manifest_sha256": MANIFEST_SHA,
        "git_revision": "0123456789abcdef0123456789abcdef01234567",
        "metrics": {"accuracy": 0.88},
        "parity": {"max_abs_diff": 2.1e-6, "n_texts": 64, "labels_identical": True, "atol": 1e-4},
        "quantization": {
            "file": "model.int8.onnx",
            "accuracy_fp32": 0.88,
            "accuracy_int8": 0.875,
            "accuracy_delta": -0.005,
        },
        "created": "2026-12-02T12:00:00Z",
    }


def loadtest() -> dict[str, Any]:
    return {
        "url": "http://127.0.0.1:8000",
        "model": "sentiment",
        "results": [
            {
                "concurrency": 1,
                "requests": 100,
                "rps": 60.0,
                "p50_ms": 15.0,
                "p95_ms": 30.0,
                "p99_ms": 40.0,
                "errors": 0,
            },
            {
                "concurrency": 8,
                "requests": 400,
                "rps": 130.0,
                "p50_ms": 50.0,
                "p95_ms": 70.0,
                "p99_ms": 90.0,
                "errors": 0,
            },
        ],
    }


def policy_report(stack: str = "dev") -> dict[str, Any]:
    return {
        "stack": stack,
        "violations": [
            {
                "policy": "tags-required",
                "urn": "urn:x",
                "message": "m",
                "enforcement": "advisory",
                "severity": "low",
            }
        ],
        "waived": [],
        "policies": ["tags-required", "eu-region-only"],
    }


def build_record() -> dict[str, Any]:
    return {
        "images": {
            "training": {
                "name": "ghcr.io/acme/eu-ml-training",
                "version": "0.1.0-abc1234",
                "tags": ["0.1.0-abc1234"],
                "digest": DIGEST_T,
                "image_id": "sha256:" + "3" * 64,
                "built_at": "2026-12-02T12:00:00Z",
                "builder": "docker",
            },
            "serving": {
                "name": "ghcr.io/acme/eu-ml-serving:0.1.0-abc1234-m3",
                "version": "0.1.0-abc1234-m3",
                "tags": ["0.1.0-abc1234-m3"],
                "digest": DIGEST_S,
                "image_id": "sha256:" + "4" * 64,
                "built_at": "2026-12-02T12:00:00Z",
                "builder": "docker",
                "model_version": "3",
                "dataset_manifest_sha256": MANIFEST_SHA,
                # What containers.build reads back from the built image: this bundle's hash.
                "labels": {"eu.ml-platform.bundle.metadata-sha256": BUNDLE_SHA},
            },
        }
    }


# sha256 of export/metadata.json exactly as make_candidate writes it (write_json below).
BUNDLE_SHA = hashlib.sha256(json.dumps(bundle_metadata()).encode()).hexdigest()


def write_json(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def make_candidate(root: Path, *, accuracy: float = 0.88) -> Path:
    """A training output folder as `python -m training train --output` leaves it (metadata only)."""
    write_json(root / "metrics.json", metrics(accuracy))
    write_json(
        root / "manifest.json",
        {"rows": {"train": 3000, "test": 2000}, "label_balance": {"positive": 0.3}, "sha256": MANIFEST_SHA},
    )
    write_json(root / "cost.json", {"instance_type": "local-cpu", "hours": 0.05, "usd": 0.0})
    write_json(root / "export" / "metadata.json", bundle_metadata())
    return root


def evidence_of(files: dict[str, Path], candidate: Path | None = None, **extra: Any) -> Any:
    """The `evidence_files` fixture's inputs as the CLI loads them (another candidate folder, or approval=...)."""
    from promotion.evidence import load_evidence

    return load_evidence(
        str(candidate or files["candidate"]),
        loadtest=str(files["loadtest"]),
        policy_report=str(files["policy_report"]),
        build_record=str(files["build_record"]),
        **extra,
    )


class RecordingDeployer:
    """Stands in for `pulumi up` + the live smoke check; records the order of the calls."""

    def __init__(
        self,
        fail: str | tuple[str, ...] | None = None,
        calls: list[str] | None = None,
        live_loadtest: Path | None = None,
    ) -> None:
        self.fail = (fail,) if isinstance(fail, str) else tuple(fail or ())
        self.calls = calls if calls is not None else []
        self.live_loadtest = live_loadtest
        """The load test the smoke check 'ran' against the live endpoint."""

    def _step(self, step: str, image: str | None) -> None:
        from promotion.deploy import DeployError

        self.calls.append(f"{step} {image}")
        if step in self.fail:
            raise DeployError(f"{step} failed (test)")

    def up(self, image: str) -> None:
        self._step("up", image)

    def smoke(self, image: str) -> bytes | None:
        self._step("smoke", image)
        return self.live_loadtest.read_bytes() if self.live_loadtest else None

    def rollback(self, image: str | None) -> None:
        self._step("rollback", image)


# MLflow's job runner (on by default) makes a folder in /dev/shm for its queue at every start and never removes
# it: one empty folder left on the machine per server the suite started. The tests use tracking and the registry
# only.
MLFLOW_SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def mlflow_server(db: Path) -> tuple[subprocess.Popen, str]:
    """A real `mlflow server` on a sqlite store, on a free loopback port; stop it with localservers.stop_group.

    Its uvicorn worker binds the port ~4 s after the start: a pick taken meanwhile is picked again."""
    proc, port = start_on_free_port(
        # Artifacts beside the database: by default they go to ./mlartifacts, the folder the tests run in.
        lambda port: [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{db}",
                      "--artifacts-destination", str(db.with_name(f"{db.stem}-artifacts")),
                      "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        db.with_name(f"{db.stem}-server.log"), "mlflow server", http_ok("/health"), timeout_s=90, grace_s=20,
        env=MLFLOW_SERVER_ENV,
    )  # fmt: skip
    return proc, f"http://127.0.0.1:{port}"


def candidate_in_bucket(candidate: Path, key: str) -> str:
    """The candidate run folder in (moto's) S3, as the pipelines give it: a tracking server needs that."""
    import boto3
    import fsspec

    s3 = boto3.client("s3")
    if "promotion-runs" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(
            Bucket="promotion-runs", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"}
        )
    fsspec.filesystem("s3", skip_instance_cache=True).put(
        str(candidate), f"promotion-runs/{key}", recursive=True
    )
    return f"s3://promotion-runs/{key}"


# The CLI as CI, the pipeline's promote step and a person run it: a process of its own, signalled from outside.
REPO = Path(__file__).resolve().parents[2]
MARKER = "PROMOTION_TEST_DEPLOY_MARKER"
"""Set by the `marker` fixture (conftest.py): the deploy and smoke commands a test starts inherit it."""


def promotion_cli(*args: str, store: Path, background: bool = False, **popen: Any) -> Any:
    """`python -m promotion ARGS` on the store `store` (its registry a sqlite file in it): the finished process, or
    with `background` the running one in a session of its own (text stdout/stderr piped unless `popen` says)."""
    env = {**os.environ, "PROMOTION_STORE": str(store), "MLFLOW_REGISTRY_URI": f"sqlite:///{store}/mlflow.db"}
    env.pop("PROMOTION_LOCK_ID", None)
    cmd = [sys.executable, "-m", "promotion", *args]
    if background:
        popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen}
        return subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True, **popen)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)


def run_module(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`python -m ARGS` of this checkout (infra.plan, policies.analyze, promotion) run in `cwd`, finished."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


def policy_gate_line(files: dict[str, Path], report: Path, store: Path, cwd: Path = REPO) -> str:
    """The policy-clean line of `python -m promotion evaluate` on the evidence `files` with this policy report."""
    done = run_module(
        "promotion", "evaluate", "--env", "dev", "--store", str(store), "--candidate", str(files["candidate"]),
        "--loadtest", str(files["loadtest"]), "--policy-report", str(report),
        "--build-record", str(files["build_record"]), cwd=cwd,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr
    (line,) = [x for x in done.stdout.splitlines() if "policy-clean" in x]
    return line


def promote_args(files: dict[str, Path], deploy: str, smoke: str = "true") -> list[str]:
    return [
        "promote", "--env", "dev", "--candidate", str(files["candidate"]), "--loadtest", str(files["loadtest"]),
        "--policy-report", str(files["policy_report"]), "--build-record", str(files["build_record"]),
        "--smoke-command", smoke, "--deploy-command", deploy,
    ]  # fmt: skip


def blocking(pidfile: Path) -> str:
    """A deploy or smoke command that writes its pid and runs until stopped."""
    return f"sh -c 'echo $$ > {pidfile}; exec sleep 120'"


def deploying(
    files: dict[str, Path], store: Path, pidfile: Path, *, step: str = "deploy"
) -> subprocess.Popen:
    """A promotion inside its deploy (`step` "deploy") or its smoke check ("smoke"), which runs until stopped."""
    args = (
        promote_args(files, blocking(pidfile))
        if step == "deploy"
        else promote_args(files, "true", blocking(pidfile))
    )
    holder = promotion_cli(*args, store=store, background=True)
    for _ in range(1200):
        if pidfile.exists() and pidfile.read_text().strip() or holder.poll() is not None:
            break
        time.sleep(0.1)
    assert pidfile.exists(), f"the promotion never reached its {step}: {holder.communicate()}"
    time.sleep(0.2)
    return holder


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def marked(marker: str) -> list[psutil.Process]:
    """The live processes whose environment carries `marker` (what a deploy command started)."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(MARKER) == marker:
                found.append(proc)
    return found


def live_sleeps(marker: str) -> list[str]:
    """The live `sleep`s carrying `marker` (a grace for the kernel to finish what was already killed)."""
    deadline = time.monotonic() + 2
    while (left := [p for p in marked(marker) if p.name() == "sleep"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [f"pid {p.pid}: {' '.join(p.cmdline())}" for p in left]
