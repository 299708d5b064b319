"""Kubernetes Job rendering (schema-validated), submission through the kubernetes client, and the torchrun
wrapper that keeps exit code 75 (real torchrun processes)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from tests.httpd import http_server
from training import elastic, launch
from training.errors import ConfigError

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed"
)
REPO = Path(__file__).resolve().parents[2]


def _job(manifests: list[dict]) -> dict:
    return next(m for m in manifests if m["kind"] == "Job")


@pytest.mark.parametrize("k8s_version", ["1.31", "1.33"])
def test_rendered_manifests_pass_the_kubernetes_schema(k8s_version: str) -> None:
    for doc in launch.render(
        launch.LaunchConfig(nodes=3, gpus_per_node=2, data_uri="s3://acme-mlp-dev-raw/x.csv")
    ):
        kubernetes_validate.validate(doc, k8s_version, strict=True)


def test_schema_validation_would_catch_a_broken_job() -> None:
    job = _job(launch.render(launch.LaunchConfig()))
    job["spec"]["completions"] = "2"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.31", strict=True)


def test_job_runs_torchrun_on_the_gpu_pool_and_retries_preemptions() -> None:
    cfg = launch.LaunchConfig(nodes=4, gpus_per_node=8, name="run-7", overrides=("optim.lr=3e-5",))
    service, job = launch.render(cfg)
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 4)
    assert pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == "trainer" and job["metadata"]["namespace"] == "training"
    assert pod["nodeSelector"] == {"platform.eu-ml/pool": "gpu"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    cmd = container["command"]
    assert cmd[:3] == ["python", "-m", "training.elastic"]
    assert {"--nnodes=4", "--nproc_per_node=8", "--rdzv_backend=c10d"} <= set(cmd)
    # rendezvous on pod 0 through the headless service that the pods' subdomain points at
    assert "--rdzv_endpoint=run-7-0.run-7.training.svc.cluster.local:29400" in cmd
    # a GPU node scaled from zero joins late; a store silent for 60 s fails the rendezvous (-> exit 75)
    assert "--rdzv_conf=join_timeout=1800,read_timeout=60" in cmd
    assert "--max_restarts=0" in cmd
    assert pod["subdomain"] == service["metadata"]["name"] == "run-7"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= job["spec"]["template"]["metadata"]["labels"].items()
    assert cmd[cmd.index("-m", 3) :][:4] == ["-m", "training", "train", "--preset"]
    assert cmd[-1] == "optim.lr=3e-5"
    environment = {e["name"]: e["value"] for e in container["env"]}
    assert environment["TRAINING_CHECKPOINT_URI"] == cfg.checkpoint_uri
    assert environment["TRAINING_INTERRUPTION_PROVIDER"] == "aws"
    # NCCL errors reach Python (exit 75) instead of a watchdog SIGABRT (134, which would fail the Job)
    assert environment["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "2"
    # preemption loops are capped: wall time of the Job, and exits 75 recorded in the checkpoint
    assert spec["activeDeadlineSeconds"] == 2 * 24 * 3600
    assert environment["TRAINING_MAX_PREEMPTIONS"] == "30"

    rules = spec["podFailurePolicy"]["rules"]
    assert rules[0] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    assert rules[1]["action"] == "Ignore" and rules[1]["onExitCodes"]["values"] == [75]
    assert rules[2]["action"] == "FailJob" and rules[2]["onExitCodes"]["operator"] == "NotIn"
    # ascending, as the API server requires; 69 (storage outage) is retried within backoffLimit
    assert rules[2]["onExitCodes"]["values"] == [0, 69, 75]
    assert all(r.get("onExitCodes", {}).get("containerName", "trainer") == "trainer" for r in rules)
    assert spec["podReplacementPolicy"] == "Failed"
    # torchrun's grace for workers fits inside the kubelet's
    shutdown = int(next(a for a in cmd if a.startswith("--shutdown_timeout=")).split("=")[1])
    assert shutdown < pod["terminationGracePeriodSeconds"]


def test_defaults_equal_the_infra_outputs() -> None:
    shape = pytest.importorskip("infra.shape", reason="infra needs the Pulumi SDK")
    sa = shape.SERVICE_ACCOUNTS["trainer"]
    gpu = shape.POOL_SELECTORS["gpu"]
    cfg = launch.LaunchConfig()
    assert (cfg.namespace, cfg.service_account) == (sa.namespace, sa.name)
    assert dict(cfg.node_selector) == dict(gpu.node_selector)
    assert [dict(t) for t in cfg.tolerations] == [dict(t) for t in gpu.tolerations]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "Bad_Name"}, "name"),
        ({"nodes": 0}, "nodes"),
        ({"checkpoint_uri": "/tmp/ckpt"}, "checkpoint_uri"),
        ({"env": {"NOT_DECLARED": "1"}}, "env"),
        ({"overrides": ("lr",)}, "overrides"),
        ({"shutdown_timeout_s": 40}, "shutdown_timeout_s"),
        ({"cloud": "ibm"}, "cloud"),
        ({"tolerations": ({"key": "x", "effect": "Sometimes"},)}, "tolerations"),
        # Judged by `train`'s own presets and config here: rendered, they failed only in the pod on a GPU node.
        ({"preset": "smok"}, "preset"),
        ({"overrides": ("optim.lrr=3e-5",)}, "optim.lrr"),
        ({"overrides": ("epochs=two",)}, "epochs"),
    ],
)
def test_bad_launch_config_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        launch.LaunchConfig(**kwargs)
    assert info.value.field == field


def test_toleration_syntax() -> None:
    assert launch.parse_toleration("nvidia.com/gpu=present:NoSchedule") == dict(launch.DEFAULT_TOLERATIONS[0])
    assert launch.parse_toleration("spot:NoExecute") == {
        "key": "spot",
        "operator": "Exists",
        "effect": "NoExecute",
    }
    with pytest.raises(ConfigError):
        launch.parse_toleration("nvidia.com/gpu")


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="training")
    launch.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_renders_yaml_with_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code = _cli(
        ["launch", "--nodes", "2", "--image", "r.example/training:1.0", "--node-selector", "pool=a100",
         "--toleration", "spot=true:NoSchedule", "--cloud", "gcp", "data.max_train_rows=100",
         "--checkpoint-uri", "gs://acme-mlp-gcp-dev-checkpoints/sentiment-train"]
    )  # fmt: skip
    assert code == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["Service", "Job"]
    pod = docs[1]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "a100"}
    assert pod["tolerations"] == [
        {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    assert pod["containers"][0]["image"] == "r.example/training:1.0"
    assert pod["containers"][0]["command"][-1] == "data.max_train_rows=100"
    for doc in docs:
        kubernetes_validate.validate(doc, "1.31", strict=True)


def test_cli_rejects_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["launch", "--checkpoint-uri", "ckpt/"]) == 2
    assert "checkpoint_uri" in capsys.readouterr().err


def test_a_mistyped_preset_or_override_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "job.yaml"
    for argv in (
        ["--preset", "smok"],
        ["optim.lrr=3e-5"],
        ["--tune", "--preset", "smok"],
        ["--tune", "epoch=3"],
    ):
        assert _cli(["launch", "--image", "r.example/training:1.0", "--out", str(out), *argv]) == 2, argv
        err = capsys.readouterr().err
        assert "unknown preset 'smok'; choose one of smoke" in err or "unknown key; known here:" in err, err
    assert not out.exists()


class _FakeApiServer(BaseHTTPRequestHandler):
    """Just enough of the Kubernetes API for create calls: records them; Services already exist (409)."""

    requests: list[tuple[str, dict]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append((self.path, body))
        status = 409 if body["kind"] == "Service" else 201
        payload = (
            body
            if status == 201
            else {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409}
        )
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_apply_posts_service_and_job_through_the_kubernetes_client(tmp_path: Path) -> None:
    pytest.importorskip("kubernetes", reason="the kubernetes client is not installed")
    with http_server(_FakeApiServer) as served:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": served.url}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        manifests = launch.render(launch.LaunchConfig(nodes=2))
        done = launch.apply(manifests, kubeconfig=str(kubeconfig))
    assert done == ["service/sentiment-train unchanged", "job/sentiment-train created"]
    paths = [p for p, _ in _FakeApiServer.requests]
    assert paths == ["/api/v1/namespaces/training/services", "/apis/batch/v1/namespaces/training/jobs"]
    assert _FakeApiServer.requests[1][1]["spec"]["completionMode"] == "Indexed"


def test_cli_modules_import_without_torch() -> None:
    code = "import sys, training.launch, training.export, training.elastic; sys.exit('torch' in sys.modules)"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


# --------------------------------------------------------------------------- training.elastic


def test_pod_exit_code_mapping() -> None:
    assert elastic.pod_exit_code([]) == 0
    assert elastic.pod_exit_code([75, 75]) == 75
    assert elastic.pod_exit_code([75, -int(signal.SIGTERM)]) == 75
    assert elastic.pod_exit_code([75, 2]) == 2
    assert elastic.pod_exit_code([75, 3]) == 3
    assert elastic.pod_exit_code([-int(signal.SIGKILL)]) == 137  # an OOM kill is not a preemption
    assert elastic.pod_exit_code([-int(signal.SIGSEGV), 75]) == 128 + int(signal.SIGSEGV)


WORKER = textwrap.dedent(
    """
    import os, signal, sys, time
    mode, rank, out = sys.argv[1], int(os.environ["RANK"]), sys.argv[2]
    def stop(signum, frame):
        open(os.path.join(out, f"saved-{rank}"), "w").close()  # stands for the trainer's checkpoint
        sys.exit(75)
    signal.signal(signal.SIGTERM, stop)
    open(os.path.join(out, f"started-{rank}"), "w").close()
    if mode == "preempt":
        sys.exit(75)
    if mode == "crash" and rank == 1:
        sys.exit(3)
    time.sleep(60)
    """
)


def _torchrun(tmp_path: Path, mode: str) -> subprocess.Popen:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    cmd = [sys.executable, "-m", "training.elastic", "--standalone", "--nproc_per_node=2", "--max_restarts=0"]
    cmd += ["--shutdown_timeout=10", str(script), mode, str(tmp_path)]
    environment = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        cmd, cwd=tmp_path, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.integration
@pytest.mark.parametrize(("mode", "expected"), [("preempt", 75), ("crash", 3)])
def test_torchrun_wrapper_passes_worker_exit_codes(tmp_path: Path, mode: str, expected: int) -> None:
    proc = _torchrun(tmp_path, mode)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == expected, err[-2000:]


@pytest.mark.integration
def test_torchrun_wrapper_turns_sigterm_into_a_checkpoint_and_75(tmp_path: Path) -> None:
    proc = _torchrun(tmp_path, "wait")
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"started-{r}").exists() for r in (0, 1)):
            assert proc.poll() is None and time.monotonic() < deadline, "workers did not start"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)  # what the kubelet does when the spot node is reclaimed
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 75, err[-2000:]
    assert (tmp_path / "saved-0").exists() and (tmp_path / "saved-1").exists()


def test_image_defaults_to_the_build_record(tmp_path: Path) -> None:
    record = tmp_path / "build-record.json"
    assert launch.image_from_build_record(record) is None
    entry = {
        "name": "training",
        "version": "0.1.0-abc1234",
        "tags": ["localhost/eu-ml-platform/training:0.1.0-abc1234"],
    }
    record.write_text(json.dumps({"images": {"training": entry}}))
    assert launch.image_from_build_record(record) == "localhost/eu-ml-platform/training:0.1.0-abc1234"
    entry |= {
        "pushed": True,
        "tags": [*entry["tags"], "123.dkr.ecr.eu-south-2.amazonaws.com/training:0.1.0-abc1234"],
    }
    record.write_text(json.dumps({"images": {"training": entry}}))
    assert launch.image_from_build_record(record).startswith("123.dkr.ecr")


@pytest.fixture(scope="module")
def rendered_plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every cloud's dev stack rendered by infra's own planner (what `make plan` writes to reports/plan)."""
    pytest.importorskip("pulumi", reason="infra needs the Pulumi SDK")
    from infra import plan as planner

    return planner.render(["dev", "gcp-dev", "azure-dev"], tmp_path_factory.mktemp("plan"))


@pytest.mark.parametrize("stack", ["dev", "gcp-dev", "azure-dev"])
def test_job_fits_each_clouds_rendered_gpu_pool_and_identity(rendered_plans: dict, stack: str) -> None:
    """Checked against that cloud's plan (its pool taints, its trainer identity), not against the base pool."""
    plan = rendered_plans[stack]
    outputs = plan["outputs"]
    # As the README says to launch on that stack: its own checkpoints bucket (refused on another cloud).
    cfg = launch.LaunchConfig(
        cloud=plan["cloud"], checkpoint_uri=f"{outputs['checkpoint_bucket_uri']}/sentiment-train"
    )
    _, job = launch.render(cfg)
    pod = job["spec"]["template"]
    spec = pod["spec"]
    taints = outputs["gpu_pool"]["taints"]
    assert taints, f"{stack}: the plan exports no GPU pool taints"
    for taint in taints:
        assert any(
            t["key"] == taint["key"]
            and t["effect"] == taint["effect"]
            and (t["operator"] == "Exists" or t.get("value") == taint["value"])
            for t in spec["tolerations"]
        ), f"{stack}: no toleration for {taint} in {spec['tolerations']}"
    assert spec["nodeSelector"].items() <= outputs["gpu_pool"]["node_label"].items()
    assert spec["serviceAccountName"] == outputs["trainer_service_account"]
    assert job["metadata"]["namespace"] == outputs["trainer_namespace"]
    assert outputs["trainer_pod_labels"].items() <= pod["metadata"]["labels"].items()
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    # Azure: https://<account>.blob.core.windows.net/<container>
    bucket = urlparse(outputs["checkpoint_bucket_uri"])
    expected = {
        "aws": f"s3://{bucket.netloc}/sentiment-train",
        "gcp": f"gs://{bucket.netloc}/sentiment-train",
        "azure": f"az://{bucket.path.strip('/')}@{bucket.netloc}/sentiment-train",  # the form adlfs reads
    }[plan["cloud"]]
    assert env["TRAINING_CHECKPOINT_URI"] == expected
    if plan["cloud"] == "azure":  # the AKS spot taint and the workload-identity label are really there
        assert {"kubernetes.azure.com/scalesetpriority", "nvidia.com/gpu"} <= {
            t["key"] for t in spec["tolerations"]
        }
        assert pod["metadata"]["labels"]["azure.workload.identity/use"] == "true"
