"""Triton pods stop without dropping requests on scale-down, rollout and node drain.

The Deployment had no preStop hook and a 30 s grace period. Kubernetes sends SIGTERM while it removes the pod
from the Service's endpoints, and tritonserver closes its HTTP listener the moment SIGTERM arrives
(tests/serving/test_serving_shutdown.py), so every request routed to the pod before kube-proxy caught up was
refused: errors on the endpoint at each autoscaler step. The image ran with Triton's default 30 s exit
timeout, as long as the whole grace period: a pod draining open connections was SIGKILLed mid-request.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from dockerfile_parse import DockerfileParser
from infra_fixtures import STACKS, Plan, k8s_objects

from infra.k8s import serving

ROOT = Path(__file__).resolve().parents[2]
SERVING_DOCKERFILE = ROOT / "containers" / "serving" / "Dockerfile"
# kube-proxy syncs in about a second; ingress controllers and large clusters take several.
MIN_PRESTOP_S = 5
# Triton's overshoot past --exit-timeout-secs, measured up to ~1 s (tests/serving/test_serving_shutdown.py).
MIN_SLACK_S = 2


def triton_deployment(plan: Plan) -> dict[str, Any]:
    (found,) = [
        o for o in k8s_objects(plan) if o["kind"] == "Deployment" and o["metadata"]["name"] == serving.APP
    ]
    return found


def triton_container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == serving.APP
    ]
    return container


def image_exit_timeout() -> int:
    """The serving image's --exit-timeout-secs; Triton's default (30) when the CMD does not set it."""
    (cmd,) = [
        i["value"]
        for i in DockerfileParser(path=str(SERVING_DOCKERFILE)).structure
        if i["instruction"] == "CMD"
    ]
    found = re.findall(r"--exit-timeout-secs[= ](\d+)", cmd)
    return int(found[-1]) if found else 30


@pytest.mark.parametrize("stack", STACKS)
def test_the_triton_container_keeps_serving_while_endpoints_converge(
    plans: dict[str, Plan], stack: str
) -> None:
    hook = triton_container(triton_deployment(plans[stack])).get("lifecycle", {}).get("preStop")
    assert hook == {"sleep": {"seconds": serving.PRESTOP_SLEEP_S}}, f"{stack}: preStop is {hook}"
    assert serving.PRESTOP_SLEEP_S >= MIN_PRESTOP_S


@pytest.mark.parametrize("stack", STACKS)
def test_the_grace_period_covers_the_hook_and_tritons_exit_timeout(
    plans: dict[str, Plan], stack: str
) -> None:
    """Read from the rendered Deployment and the image's CMD, so raising one of them alone fails here."""
    deployment = triton_deployment(plans[stack])
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    hook = triton_container(deployment).get("lifecycle", {}).get("preStop", {})
    prestop = hook.get("sleep", {}).get("seconds", 0)
    needed = prestop + image_exit_timeout() + MIN_SLACK_S
    assert grace >= needed, (
        f"{stack}: terminationGracePeriodSeconds {grace} < preStop {prestop} + the image's "
        f"--exit-timeout-secs {image_exit_timeout()} + {MIN_SLACK_S}: SIGKILL would cut in-flight requests"
    )


def test_the_serving_image_uses_the_exit_timeout_the_grace_period_is_sized_for() -> None:
    assert image_exit_timeout() == serving.TRITON_EXIT_TIMEOUT_S, (
        f"{SERVING_DOCKERFILE}: --exit-timeout-secs {image_exit_timeout()} but infra/k8s/serving.py sizes the "
        f"grace period for {serving.TRITON_EXIT_TIMEOUT_S}: change both"
    )
    assert serving.TERMINATION_GRACE_S == (
        serving.PRESTOP_SLEEP_S + serving.TRITON_EXIT_TIMEOUT_S + serving.SHUTDOWN_SLACK_S
    )
    assert serving.SHUTDOWN_SLACK_S >= MIN_SLACK_S


@pytest.mark.parametrize("stack", STACKS)
def test_rollouts_and_drains_keep_serving_capacity(plans: dict[str, Plan], stack: str) -> None:
    """A rollout starts the new pod before stopping an old one; the readiness probe is the endpoint Triton
    refuses on SIGTERM, so a stopping pod leaves the endpoints by its probe too; drains take one pod at a time."""
    deployment = triton_deployment(plans[stack])
    rolling = deployment["spec"]["strategy"]["rollingUpdate"]
    assert (rolling["maxSurge"], rolling["maxUnavailable"]) == (1, 0)
    probe = triton_container(deployment)["readinessProbe"]["httpGet"]
    assert (probe["path"], probe["port"]) == (serving.READY_PATH, "http")
    (pdb,) = [o for o in k8s_objects(plans[stack]) if o["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]


def test_the_schema_checks_the_hook_and_needs_a_cluster_with_the_sleep_action(plans: dict[str, Plan]) -> None:
    """The sleep action is in the API from 1.29 (on by default from 1.30); 1.28's API server would drop it."""
    deployment = triton_deployment(plans["dev"])
    kubernetes_validate.validate(deployment, "1.33", strict=True)
    with pytest.raises(kubernetes_validate.ValidationError, match="'sleep' was unexpected"):
        kubernetes_validate.validate(deployment, "1.28", strict=True)
    container = triton_container(deployment)
    container["lifecycle"]["preStop"]["sleep"]["seconds"] = "10"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.33", strict=True)
