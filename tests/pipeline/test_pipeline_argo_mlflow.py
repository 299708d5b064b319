"""The retraining pipeline's MLflow steps (train, promote) reach a team's MLflow server through the optional Secret
`mlflow`; in a pod without one, the promote and train steps say that MLflow's files are lost with the pod.

Before, no MLflow variable reached a step: the promote step registered the version and moved the environment's
alias in a sqlite file inside its pod, lost with it. The real path: a real `mlflow server`, moto's S3 as the
stack's bucket, and the promote step's own command line from the rendered WorkflowTemplate, run with the
environment a kubelet builds from the container and the Secret.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from pipeline import argo, dag
from pipeline.cli import main
from tests.k8s_api import names
from tests.training.test_launch_mlflow import ENV_FROM, kubelet_env, secret

ROOT = Path(__file__).resolve().parents[2]
K8S_VERSION = "1.33"  # the stacks' cluster minor (Pulumi.*.yaml kubernetesVersion)
TRAINING = "reg.example/mlp/training@sha256:" + "1" * 64
hera = pytest.importorskip(
    "hera.workflows.models", reason="hera (Argo's schema as models) is a dev dependency"
)
sys.path.insert(0, str(ROOT / "tests" / "promotion"))
BUCKET = "pipeline-mlflow"


def _steps(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in doc["spec"]["templates"] if "container" in t}


def test_the_mlflow_steps_take_the_optional_secret_and_stay_valid_objects() -> None:
    doc = argo.workflow_template(training_image=TRAINING, environment="dev", params=dag.Params())
    steps = _steps(doc)
    with_secret = {name for name, t in steps.items() if "envFrom" in t["container"]}
    assert with_secret == {"train", "promote"}  # the steps that import MLflow; no other sees its token
    for name in with_secret:
        assert steps[name]["container"]["envFrom"] == ENV_FROM
    model = hera.WorkflowTemplate.model_validate(doc)
    back = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert json.dumps(back, sort_keys=True) == json.dumps(doc, sort_keys=True)  # envFrom known to Argo 4.0.5
    claim = doc["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    volumes = [*doc["spec"]["volumes"], {"name": claim, "persistentVolumeClaim": {"claimName": claim}}]
    for name in with_secret:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": argo.NAMESPACE},
            "spec": {"containers": [{"name": "main", **steps[name]["container"]}], "volumes": volumes},
        }
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
    assert names.dns1123_subdomain(argo.MLFLOW_SECRET) == []


def _argv(template: dict[str, Any], step: str, parameters: dict[str, str], work: Path) -> list[str]:
    """The step's argv as Argo runs it: workflow parameters substituted, the work volume mounted at /work."""
    container = _steps(template)[step]["container"]
    argv = []
    for part in [*container["command"], *container["args"]]:
        part = re.sub(r"\{\{workflow\.parameters\.([a-z-]+)\}\}", lambda m: parameters[m.group(1)], part)
        if part == argo.WORK_MOUNT or part.startswith(argo.WORK_MOUNT + "/"):
            part = str(work) + part[len(argo.WORK_MOUNT) :]
        argv.append(part)
    assert argv[0] == "python"
    return [sys.executable, *argv[1:]]


@pytest.mark.integration
def test_the_promote_step_registers_on_the_server_the_secret_names(
    tmp_path: Path, s3_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from mlflow import MlflowClient
    from promotion_fixtures import loadtest, make_candidate, mlflow_server, policy_report, write_json

    from localservers import stop_group
    from pipeline.images import bundle_sha256

    pytest.importorskip("uvicorn", reason="`mlflow server` needs uvicorn (in the project's lock)")
    boto3.client("s3").create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-south-2"}
    )
    pod_dir, work = tmp_path / "pod", tmp_path / "work"  # the step's working directory; the /work volume
    make_candidate(work / "candidate")
    write_json(pod_dir / "reports" / "policy" / "dev.json", policy_report("dev"))
    store = f"s3://{BUCKET}/model-store"
    # A manifest.json reference names its own run: this step promotes without writing a drift reference
    # (tests/pipeline/test_pipeline_drift_reference.py writes one).
    params = dag.Params(
        store=store,
        loadtest=str(write_json(tmp_path / "loadtest.json", loadtest())),
        reference=f"s3://{BUCKET}/runs/reference-run/manifest.json",
    )
    template = argo.workflow_template(training_image=TRAINING, environment="dev", params=params)
    parameters = {p["name"]: p["value"] for p in template["spec"]["arguments"]["parameters"]}
    # Submitted with `-p local=true` (dev allows a registry-only promotion): with local=false a passing candidate
    # is deployable, and promotion refuses to move an alias without its deploy and smoke commands.
    parameters["local"] = "true"
    argv = _argv(template, "promote", parameters, work)
    assert argv[1:5] == ["-m", "pipeline", "step", "promote"]

    image_env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "KUBERNETES_"))}
    image_env["PYTHONPATH"] = str(ROOT)  # the image's /opt/app
    container = _steps(template)["promote"]["container"]
    monkeypatch.chdir(tmp_path)  # the server keeps artifacts in ./mlartifacts
    server, url = mlflow_server(tmp_path / "mlflow.db")
    try:
        env = kubelet_env(container, [secret("mlflow", MLFLOW_TRACKING_URI=url)], image_env)
        pod_dir.mkdir(exist_ok=True)
        proc = subprocess.run(
            argv, cwd=pod_dir, env=env, capture_output=True, text=True, timeout=240, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert json.loads((work / "decisions" / "promote.json").read_text())["promoted"] is True, proc.stdout
        client = MlflowClient(tracking_uri=url, registry_uri=url)
        version = client.get_model_version_by_alias("sentiment", "dev")
    finally:
        stop_group(server, grace_s=20)
    assert version.version == "1"
    published = f"{store}/sentiment/candidates/{bundle_sha256(work / 'candidate' / 'export')[:16]}"
    assert version.source == published + "/export"  # in the bucket: outlives the workflow's volume
    assert not (pod_dir / "runs").exists()  # was: runs/registry/mlflow.db, on the pod's disk
    assert "warning: MLflow" not in proc.stderr


@pytest.mark.parametrize(
    ("secret_uri", "warned"),
    [(None, True), ("sqlite:////tmp/registry.db", True), ("https://mlflow.example.eu", False)],
)
def test_promote_in_a_pod_warns_when_the_registry_is_a_file_in_it(
    secret_uri: str | None,
    warned: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    container = _steps(
        argo.workflow_template(training_image=TRAINING, environment="dev", params=dag.Params())
    )
    secrets = [secret("mlflow", MLFLOW_TRACKING_URI=secret_uri)] if secret_uri else []
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI"):
        monkeypatch.delenv(name, raising=False)
    for name, value in kubelet_env(container["promote"]["container"], secrets).items():
        monkeypatch.setenv(name, value)
    argv = ["step", "promote", "--candidate", str(tmp_path / "missing"), "--store", str(tmp_path / "store")]
    assert (
        main([*argv, "--model", "sentiment", "--env", "dev", "--local", "false"]) == 2
    )  # no candidate there
    err = capsys.readouterr().err
    assert ("warning: MLflow registry" in err) is warned, err
    if warned:
        assert "is lost with the pod" in err and "create secret generic mlflow" in err
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")  # the same step on a laptop: its sqlite file stays
    assert main([*argv, "--model", "sentiment", "--env", "dev", "--local", "false"]) == 2
    assert "warning: MLflow" not in capsys.readouterr().err
