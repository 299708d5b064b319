"""Every Kubernetes object the plans declare, and the training Job rendered from a plan's outputs, is valid
against the OpenAPI schema of the stack's own Kubernetes version (kubernetes-validate, strict: unknown
fields are errors too), so the API server would not refuse it at `pulumi up`."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
from infra_fixtures import STACKS, Plan, k8s_objects, launch_config

from infra import plan as planner

# Kinds every stack must declare (so the test cannot pass on a plan that lost them).
EXPECTED_KINDS = {
    "Namespace",
    "ServiceAccount",
    "Deployment",
    "PodDisruptionBudget",
    "Service",
    "NetworkPolicy",
    "HorizontalPodAutoscaler",
    "ResourceQuota",
    "Role",
    "RoleBinding",
}
# Argo's CRDs are checked against Argo's schema in test_infra_argo.py.
NOT_OBJECTS = ("kubernetes:helm.sh/", "kubernetes:argoproj.io/")


def objects(plan: Plan) -> list[dict[str, Any]]:
    return k8s_objects(plan, NOT_OBJECTS)


def k8s_version(stack: str) -> str:
    return planner.load_stack(stack).cluster.kubernetes_version


@pytest.mark.parametrize("stack", STACKS)
def test_every_kubernetes_object_in_the_plan_is_valid_for_the_clusters_version(
    plans: dict[str, Plan], stack: str
) -> None:
    version = k8s_version(stack)
    found = objects(plans[stack])
    assert {m["kind"] for m in found} >= EXPECTED_KINDS
    for m in found:
        try:
            kubernetes_validate.validate(m, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(
                f"{stack}: {m['kind']} {m['metadata'].get('name')}: {err.message} at {list(err.path)}"
            )


@pytest.mark.parametrize("stack", ["dev", "gcp-dev", "azure-dev"])
def test_the_training_job_rendered_from_the_plans_outputs_is_valid(
    plans: dict[str, Plan], stack: str
) -> None:
    from training import launch

    cfg = launch_config(plans[stack])
    rendered = launch.render(cfg)
    assert "Job" in {m["kind"] for m in rendered}
    for m in rendered:
        kubernetes_validate.validate(m, k8s_version(stack), strict=True)


def test_the_schema_check_catches_what_the_api_server_would_refuse(plans: dict[str, Plan]) -> None:
    (deployment,) = [m for m in objects(plans["dev"]) if m["kind"] == "Deployment"]
    kubernetes_validate.validate(deployment, "1.33", strict=True)
    for mutate in (
        lambda d: d["spec"]["template"]["spec"]["containers"][0]["ports"][0].update(containerPort="8000"),
        lambda d: d["spec"].update(replica=2),  # a typo: strict schemas refuse unknown fields
        lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("name"),
    ):
        bad = copy.deepcopy(deployment)
        mutate(bad)
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(bad, "1.33", strict=True)
