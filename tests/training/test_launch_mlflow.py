"""The training Job's and the tuning workers' pods reach a team's MLflow server through the optional Secret `mlflow`.

Before, no MLflow variable reached the pods: the trainer logged to a file store in its emptyDir output, lost with
the pod. Checked here: the rendered objects against the Kubernetes OpenAPI schema (kubernetes-validate) and the API
server's rules (tests/k8s_api/); then the environment a kubelet builds from the container and a Secret made like
`kubectl create secret generic mlflow --from-literal=...`, given to the real Tracker against a real `mlflow server`.
"""

from __future__ import annotations

import base64
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.k8s_api import names
from tests.training.k8s_api_rules import assert_accepted_by_apiserver
from training import launch
from training.cli import main

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed"
)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "promotion"))
ENV_FROM = [{"secretRef": {"name": "mlflow", "optional": True}}]
IMAGE = "reg/training@sha256:" + "a" * 64


def secret(name: str, namespace: str = launch.DEFAULT_NAMESPACE, **literals: str) -> dict[str, Any]:
    """The Secret `kubectl -n NAMESPACE create secret generic NAME --from-literal=K=V ...` creates."""
    data = {k: base64.b64encode(v.encode()).decode() for k, v in literals.items()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": data,
    }


def kubelet_env(
    container: Mapping[str, Any], secrets: list[dict[str, Any]], image_env: Mapping[str, str] = {}
) -> dict[str, str]:
    """The container's environment as the kubelet builds it (kubelet_pods.go makeEnvironmentVariables): the
    image's, the cluster's service variables, each envFrom source in order (an optional Secret that does not exist
    adds nothing; a required one keeps the pod from starting), then `env`, which wins."""
    env = {**image_env, "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    by_name = {s["metadata"]["name"]: s for s in secrets}
    for source in container.get("envFrom", []):
        ref = source["secretRef"]
        found = by_name.get(ref["name"])
        if found is None:
            assert ref.get("optional"), (
                f"Secret {ref['name']} missing: the pod would stay in CreateContainerConfigError"
            )
            continue
        for key, value in found["data"].items():
            env[source.get("prefix", "") + key] = base64.b64decode(value).decode()
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
    return env


def _containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for d in docs if d["kind"] == "Job" for c in d["spec"]["template"]["spec"]["containers"]]


def _tune(capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, Any]]:
    argv = ["launch", "--tune", "--image", IMAGE, "--workers", "2", "--trials", "4", *extra]
    assert main(argv) == 0
    return list(yaml.safe_load_all(capsys.readouterr().out))


@pytest.mark.parametrize("k8s_version", ["1.31", "1.33"])
def test_the_job_and_the_tune_job_take_the_optional_mlflow_secret(
    k8s_version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job = launch.render(launch.LaunchConfig(nodes=2))
    tune = _tune(capsys)
    for docs in (job, tune):
        containers = _containers(docs)
        assert containers and all(c["envFrom"] == ENV_FROM for c in containers), containers
        for doc in docs:
            kubernetes_validate.validate(doc, k8s_version, strict=True)
        assert_accepted_by_apiserver(docs, {launch.DEFAULT_NAMESPACE})
    assert names.dns1123_subdomain(launch.MLFLOW_SECRET) == []  # ValidateEnvFrom: a Secret name
    # The Secret the READMEs tell a team to create is itself a valid object in the trainer's namespace.
    made = secret("mlflow", MLFLOW_TRACKING_URI="https://mlflow.example.eu", MLFLOW_TRACKING_TOKEN="t0ken")
    kubernetes_validate.validate(made, k8s_version, strict=True)


def test_the_secret_is_named_by_a_flag_or_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    renamed = _tune(capsys, "--mlflow-secret", "team-mlflow")
    assert _containers(renamed)[0]["envFrom"] == [{"secretRef": {"name": "team-mlflow", "optional": True}}]
    assert main(["launch", "--image", IMAGE, "--mlflow-secret", ""]) == 0
    assert all("envFrom" not in c for c in _containers(list(yaml.safe_load_all(capsys.readouterr().out))))
    assert main(["launch", "--image", IMAGE, "--mlflow-secret", "Team_MLflow"]) == 2
    assert "mlflow_secret" in capsys.readouterr().err
    # An explicit --env wins over the Secret (the kubelet lets `env` override envFrom).
    cfg = launch.LaunchConfig(env={"MLFLOW_TRACKING_URI": "https://other.example.eu"})
    (container,) = _containers(launch.render(cfg))
    env = kubelet_env(container, [secret("mlflow", MLFLOW_TRACKING_URI="https://mlflow.example.eu")])
    assert env["MLFLOW_TRACKING_URI"] == "https://other.example.eu"


@pytest.mark.integration
def test_the_trainer_tracks_to_the_server_the_secret_names_and_survives_its_outage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mlflow import MlflowClient
    from promotion_fixtures import mlflow_server

    from localservers import stop_group
    from training.tracking import Tracker, TrackingError

    pytest.importorskip("uvicorn", reason="`mlflow server` needs uvicorn (in the project's lock)")
    monkeypatch.chdir(tmp_path)  # the server keeps logged artifacts in ./mlartifacts
    server, url = mlflow_server(tmp_path / "mlflow.db")
    try:
        (container,) = _containers(launch.render(launch.LaunchConfig()))
        pod_env = kubelet_env(container, [secret("mlflow", MLFLOW_TRACKING_URI=url)])
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", "MLFLOW_EXPERIMENT_NAME"):
            monkeypatch.delenv(name, raising=False)
        for name, value in pod_env.items():
            if name.startswith("MLFLOW_"):
                monkeypatch.setenv(name, value)
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # the outage below: fail at once
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
        output = tmp_path / "output"
        output.mkdir()
        (output / "metrics.json").write_text('{"test": {"accuracy": 0.9}}')

        tracker = Tracker(True, output, "sentiment")
        run_id = tracker.start({"preset": "gpu", "lr": 5e-5})
        tracker.metrics({"loss": 0.5}, step=1)
        tracker.artifact(output / "metrics.json")
        tracker.end()
        run = MlflowClient(tracking_uri=url).get_run(run_id)
        assert run.data.metrics == {"loss": 0.5} and run.data.params["preset"] == "gpu"
        assert run.info.status == "FINISHED"
        assert not (output / "mlruns").exists()  # was: the only copy, on the pod's emptyDir

        second = Tracker(True, output, "sentiment")
        second.start({"preset": "gpu"})
        stop_group(server, grace_s=20)
        with caplog.at_level(logging.WARNING, logger="training.tracking"):
            second.metrics({"loss": 0.4}, step=2)  # was: MlflowException out of the training loop
            second.metrics({"loss": 0.3}, step=3)
            second.artifact(output / "metrics.json")
            second.end()
        warnings = [r.getMessage() for r in caplog.records if "goes on untracked" in r.getMessage()]
        assert len(warnings) == 1 and url in warnings[0], warnings  # log metrics; end's failure warns no more
        with pytest.raises(TrackingError, match="Secret `mlflow`"):
            Tracker(True, output, "sentiment").start(
                {"preset": "gpu"}
            )  # a fresh run: exit 2, nothing trained
        assert Tracker(True, output, "sentiment").start({}, run_id="abc") == "abc"  # a resumed one goes on
    finally:
        stop_group(server, grace_s=20)
        import mlflow

        mlflow.set_tracking_uri(None)  # process-wide: later tests in this process pick their own store
