"""Every Kubernetes object each stack's plan declares (Argo's and KEDA's included, as the pods they make), the chart
values that end up in objects, the node pools' labels and taints, and the training Job rendered from the plan's
outputs pass the API server's own validation and the Pod Security admission of their namespace (tests/k8s_api/).

The OpenAPI schema check (test_infra_k8s_schema.py) does not carry these rules: a Job with unordered onExitCodes
passed it and was refused with HTTP 422, and pods without a seccomp profile pass it and are refused by the admission
of a namespace that enforces "restricted". This is the check for that whole class.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from infra_fixtures import STACKS, Plan, k8s_objects, launch_config

from tests.k8s_api.names import labels as label_errors
from tests.k8s_api.objects import assert_accepted, helm_values_errors
from tests.k8s_api.pod import POD_SECURITY_ENFORCE, taint_errors

# Node pool APIs spell taint effects their own way; the kubelet registers the node with the Kubernetes effect.
CLOUD_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}
AUTOSCALER_TEMPLATE = "k8s.io/cluster-autoscaler/node-template/"
# Kinds every stack declares, so that the check cannot pass on a plan that lost them.
EXPECTED_KINDS = {"Namespace", "ServiceAccount", "Deployment", "StatefulSet", "Service", "PodDisruptionBudget",
                  "NetworkPolicy", "HorizontalPodAutoscaler", "ResourceQuota", "Role", "RoleBinding", "ConfigMap",
                  "Secret", "CronJob", "WorkflowTemplate", "CronWorkflow"}  # fmt: skip
PODS_FROM = {"Deployment", "StatefulSet", "CronJob", "WorkflowTemplate"}


def restricted_namespaces(objs: list[dict[str, Any]]) -> set[str]:
    return {
        o["metadata"]["name"]
        for o in objs
        if o["kind"] == "Namespace"
        and (o["metadata"].get("labels") or {}).get(POD_SECURITY_ENFORCE) == "restricted"
    }


def argo_executor(plan: Plan) -> dict[str, Any]:
    """The Argo controller's `executor.securityContext` (what its init and wait containers run with)."""
    (release,) = [
        r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "argo-workflows"
    ]
    return dict((release["inputs"]["values"].get("executor") or {}).get("securityContext") or {})


@pytest.mark.parametrize("stack", STACKS)
def test_every_object_in_the_plan_passes_the_apiservers_validation(
    plans: dict[str, Plan], stack: str
) -> None:
    found = k8s_objects(plans[stack])
    assert {o["kind"] for o in found} >= EXPECTED_KINDS
    restricted = restricted_namespaces(found)
    assert {"serving", "training", "drift", "cost"} <= restricted  # the admission check is not vacuous
    # What makes pods is known at preview (an unknown spec would be skipped, not checked).
    assert all(isinstance(o.get("spec"), dict) for o in found if o["kind"] in PODS_FROM)
    assert_accepted(found, restricted, executor=argo_executor(plans[stack]))


@pytest.mark.parametrize("stack", STACKS)
def test_chart_values_that_become_objects_pass(plans: dict[str, Plan], stack: str) -> None:
    releases = plans[stack].of_type("kubernetes:helm.sh/v3:Release")
    assert releases
    errors = [e for r in releases for e in helm_values_errors(r["inputs"].get("values") or {}, r["name"])]
    assert not errors, "\n".join(errors)


def node_pools(plan: Plan) -> Iterator[tuple[str, dict[str, str], list[tuple[str, str, str]]]]:
    """(pool, node labels, node taints) as each cloud's node pool API declares them for the kubelet."""
    for r in plan.iter_custom():
        t, inputs = r["type"], r["inputs"]
        if t == "aws:eks/nodeGroup:NodeGroup":
            yield r["name"], inputs.get("labels") or {}, _api_taints(inputs.get("taints"))
        elif t == "gcp:container/nodePool:NodePool":
            config = inputs.get("nodeConfig") or {}
            yield r["name"], config.get("labels") or {}, _api_taints(config.get("taints"))
        elif t == "azure-native:containerservice:AgentPool":
            yield r["name"], inputs.get("nodeLabels") or {}, _aks_taints(inputs.get("nodeTaints"))
        elif t == "azure-native:containerservice:ManagedCluster":
            for profile in inputs.get("agentPoolProfiles") or []:
                yield (
                    profile.get("name", r["name"]),
                    profile.get("nodeLabels") or {},
                    _aks_taints(profile.get("nodeTaints")),
                )
        elif t == "aws:autoscaling/tag:Tag" and inputs["tag"]["key"].startswith(AUTOSCALER_TEMPLATE):
            # cluster-autoscaler's scale-from-zero template: label/<key> = value, taint/<key> = value:Effect
            kind, _, key = inputs["tag"]["key"].removeprefix(AUTOSCALER_TEMPLATE).partition("/")
            value = inputs["tag"]["value"]
            if kind == "label":
                yield r["name"], {key: value}, []
            elif kind == "taint":
                taint_value, _, effect = value.rpartition(":")
                yield r["name"], {}, [(key, taint_value, effect)]


def _api_taints(taints: Any) -> list[tuple[str, str, str]]:
    return [(t["key"], t.get("value", ""), CLOUD_EFFECTS.get(t["effect"], t["effect"])) for t in taints or []]


def _aks_taints(taints: Any) -> list[tuple[str, str, str]]:
    """AKS's `key=value:Effect` strings."""
    out = []
    for text in taints or []:
        key_value, _, effect = text.rpartition(":")
        key, _, value = key_value.partition("=")
        out.append((key, value, effect))
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_node_pool_labels_and_taints_are_valid_node_labels_and_taints(
    plans: dict[str, Plan], stack: str
) -> None:
    pools = list(node_pools(plans[stack]))
    assert any(taints for _, _, taints in pools) and any(labels for _, labels, _ in pools)
    errors = []
    for name, labels, taints in pools:
        errors += label_errors(labels, f"{name}.labels")
        errors += [e for i, t in enumerate(taints) for e in taint_errors(*t, f"{name}.taints[{i}]")]
    assert not errors, "\n".join(errors)
    assert taint_errors(*_aks_taints(["nvidia.com/gpu=present:NO_SCHEDULE"])[0], "t")  # the effect is checked


@pytest.mark.parametrize("stack", ["dev", "gcp-dev", "azure-dev"])
def test_the_training_job_rendered_from_the_plans_outputs_is_accepted(
    plans: dict[str, Plan], stack: str
) -> None:
    from training import launch

    cfg = launch_config(plans[stack], nodes=2)
    restricted = restricted_namespaces(k8s_objects(plans[stack]))
    assert cfg.namespace in restricted
    assert_accepted(launch.render(cfg), restricted)
