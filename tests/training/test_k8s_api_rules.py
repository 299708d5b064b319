"""Every rendered object (training launch, launch --tune, pipeline renders) passes the API server's rules that the
OpenAPI schema does not carry, and the Pod Security admission of the trainer's namespace (tests/k8s_api/)."""

from __future__ import annotations

import copy

import pytest
import yaml

from pipeline import argo, dag
from tests.k8s_api.objects import api_errors
from tests.training.k8s_api_rules import assert_accepted_by_apiserver, pod_failure_policy_errors
from training import launch
from training.cli import main

# The trainer's namespace enforces Pod Security "restricted" (infra/k8s/workloads.py; the plans' Namespace objects
# are checked in tests/infra/test_infra_k8s_api_rules.py).
RESTRICTED = {launch.DEFAULT_NAMESPACE}


@pytest.mark.parametrize("nodes", [1, 3])
def test_training_job_is_accepted_by_the_apiserver(nodes: int) -> None:
    assert assert_accepted_by_apiserver(launch.render(launch.LaunchConfig(nodes=nodes)), RESTRICTED) == 1


def test_tune_job_is_accepted_by_the_apiserver(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "launch",
        "--tune",
        "--image",
        "reg/training@sha256:" + "a" * 64,
        "--workers",
        "3",
        "--trials",
        "6",
    ]
    assert main(args) == 0
    assert assert_accepted_by_apiserver(list(yaml.safe_load_all(capsys.readouterr().out)), RESTRICTED) == 1


def test_pipeline_renders_carry_no_rejected_job() -> None:
    docs = argo.render(
        training_image="reg/training@sha256:" + "a" * 64, environment="dev", params=dag.Params()
    )
    assert {d["metadata"]["namespace"] for d in docs} == {argo.NAMESPACE} == RESTRICTED
    # Each step's pod (Argo's own init/wait containers: the chart's executor values, tests/infra).
    assert_accepted_by_apiserver(docs, RESTRICTED)


def test_the_rules_catch_what_the_apiserver_rejects() -> None:
    job = launch.render_job(launch.LaunchConfig())
    assert pod_failure_policy_errors(job["spec"]) == []
    cases = {
        "must be ordered": [0, 75, 69],
        "Duplicate value": [0, 69, 69],
        "Too many": list(range(1, 257)),
    }
    for message, values in cases.items():
        bad = copy.deepcopy(job)
        bad["spec"]["podFailurePolicy"]["rules"][2]["onExitCodes"]["values"] = values
        assert any(message in e for e in pod_failure_policy_errors(bad["spec"])), message
    bad = copy.deepcopy(job)
    bad["spec"]["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] = [0, 75]
    assert any("must not be 0 for the In operator" in e for e in pod_failure_policy_errors(bad["spec"]))
    bad = copy.deepcopy(job)
    bad["spec"]["podFailurePolicy"]["rules"][1]["onExitCodes"]["containerName"] = "other"
    assert any("containerName" in e for e in pod_failure_policy_errors(bad["spec"]))


def test_the_pods_satisfy_pod_security_restricted() -> None:
    """Without capabilities.drop=["ALL"] and a RuntimeDefault seccomp profile the admission refuses every pod of the
    Job (403 `violates PodSecurity "restricted:latest"`): the Job would sit with FailedCreate events."""
    job = launch.render_job(launch.LaunchConfig())
    assert api_errors(job, RESTRICTED) == []
    bad = copy.deepcopy(job)
    bad["spec"]["template"]["spec"].pop("securityContext")
    assert any("seccompProfile" in e for e in api_errors(bad, RESTRICTED))
    template = argo.workflow_template(
        training_image="reg/t@sha256:" + "a" * 64, environment="dev", params=dag.Params()
    )
    step = next(t for t in template["spec"]["templates"] if "container" in t)
    step["container"]["securityContext"]["capabilities"] = {}
    assert any("unrestricted capabilities" in e for e in api_errors(template, RESTRICTED))
