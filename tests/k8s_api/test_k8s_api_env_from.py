"""envFrom (tests/k8s_api/env.py): each rule the API server applies fires on a mutated container and stays quiet on
the compliant one; the kubelet's silent drop of a source's keys is reported; the repository's renders pass."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from pipeline import argo, dag
from tests.k8s_api import objects
from training import launch

NS = "training"
CONTAINER: dict[str, Any] = {
    "name": "trainer",
    "image": "reg/training:1",
    "envFrom": [
        {"secretRef": {"name": "mlflow", "optional": True}},
        {"configMapRef": {"name": "train-settings"}, "prefix": "TRAIN_"},
    ],
}
JOB: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": NS},
                       "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}}}  # fmt: skip
SETTINGS: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "train-settings", "namespace": NS}, "data": {"1lr": "3e-5"}}  # fmt: skip
TEMPLATE: dict[str, Any] = {
    "apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTemplate", "metadata": {"name": "retrain", "namespace": NS},
    "spec": {"templates": [{"name": "train", "container": {"image": "reg/training:1",
                                                           "envFrom": [{"secretRef": {"name": "mlflow"}}]}}]},
}  # fmt: skip


def _env_from(o: dict[str, Any]) -> list[dict[str, Any]]:
    return o["spec"]["template"]["spec"]["containers"][0]["envFrom"]


Mutation = Callable[[dict[str, Any]], Any]
# (mutation of JOB, part of the message)
CASES: list[tuple[Mutation, str]] = [
    (lambda o: _env_from(o).append({}), "must specify one of: `configMapRef` or `secretRef`"),
    (lambda o: _env_from(o).append({"prefix": "X_"}), "must specify one of: `configMapRef` or `secretRef`"),
    (lambda o: _env_from(o)[0].update(configMapRef={"name": "mlflow"}), "may not have more than one field"),
    (lambda o: _env_from(o)[0]["secretRef"].update(name="MLflow_Secret"), "secretRef.name: Invalid value: 'MLflow_Secret': a lowercase RFC 1123 subdomain"),
    (lambda o: _env_from(o)[1]["configMapRef"].update(name="settings/train"), "configMapRef.name: Invalid value"),
    (lambda o: _env_from(o)[1]["configMapRef"].update(name="s" * 254), "no more than 253 characters"),
    (lambda o: _env_from(o)[0]["secretRef"].pop("name"), "envFrom[0].secretRef.name: Required value"),
    (lambda o: _env_from(o)[1].update(prefix="1TRAIN_"), "envFrom[1].prefix: Invalid value: '1TRAIN_': a valid environment variable name"),
    (lambda o: _env_from(o)[1].update(prefix="TRAIN LR"), "environment variable name"),
    (lambda o: _env_from(o)[0]["secretRef"].update(optional="true"), "optional: Invalid value: 'true': must be a boolean"),
    (lambda o: _env_from(o)[0]["secretRef"].update(key="MLFLOW_TRACKING_URI"), "envFrom[0].secretRef.key: unknown field"),
    (lambda o: _env_from(o)[0].update(name="mlflow"), "envFrom[0].name: unknown field"),
]  # fmt: skip


def test_the_compliant_objects_pass() -> None:
    assert objects.api_errors(JOB) == [] and objects.api_errors(TEMPLATE, executor=None) == []
    objects.assert_accepted([JOB, {**SETTINGS, "data": {"lr": "3e-5"}}])


def test_a_name_ending_in_a_dash_passes_as_the_api_server_masks_it() -> None:
    ok = copy.deepcopy(JOB)
    _env_from(ok)[0]["secretRef"]["name"] = "mlflow-"  # ValidateSecretName(name, prefix=true)
    assert objects.api_errors(ok) == []


@pytest.mark.parametrize(("mutate", "message"), CASES, ids=[m for _, m in CASES])
def test_each_env_from_rule_fires(mutate: Mutation, message: str) -> None:
    bad = copy.deepcopy(JOB)
    mutate(bad)
    errors = objects.api_errors(bad)
    assert any(message in e for e in errors), f"expected {message!r} in {errors}"


def test_an_argo_step_env_from_is_checked() -> None:
    bad = copy.deepcopy(TEMPLATE)
    bad["spec"]["templates"][0]["container"]["envFrom"][0]["secretRef"]["name"] = "MLflow"
    assert any("secretRef.name: Invalid value: 'MLflow'" in e for e in objects.api_errors(bad, executor=None))


def test_keys_the_kubelet_would_skip_are_reported() -> None:
    """Without its prefix, the ConfigMap key `1lr` is no environment variable name: the pod starts without it."""
    objects.assert_accepted([JOB, SETTINGS])  # TRAIN_1lr is one
    bare = copy.deepcopy(JOB)
    _env_from(bare)[1].pop("prefix")
    with pytest.raises(
        AssertionError, match=r"keys \['1lr'\] of ConfigMap training/train-settings .*kubelet skips"
    ):
        objects.assert_accepted([bare, SETTINGS])
    other_namespace = {**SETTINGS, "metadata": {**SETTINGS["metadata"], "namespace": "serving"}}
    objects.assert_accepted([bare, other_namespace])  # not the pod's ConfigMap


def test_the_repository_renders_that_carry_env_from_pass() -> None:
    """The training Job (training/launch_config.py mlflow_env_from; the tuning workers' Job is the same container,
    tests/training/test_k8s_api_rules.py) and the pipeline's MLflow steps (pipeline/argo.py): each carries one."""
    job = launch.render_job(launch.LaunchConfig())
    docs = argo.render(
        training_image="reg/training@sha256:" + "a" * 64, environment="dev", params=dag.Params()
    )
    carried = [c for c in job["spec"]["template"]["spec"]["containers"] if c.get("envFrom")]
    steps = [
        t
        for d in docs
        for t in (d.get("spec") or {}).get("templates") or []
        if "envFrom" in t.get("container", {})
    ]
    assert carried and steps
    objects.assert_accepted([job, *docs])
