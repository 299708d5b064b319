"""Dev scale-to-zero: a KEDA ScaledObject on the same queue-time query replaces the HPA."""

from __future__ import annotations

import dataclasses

from infra_fixtures import Plan

from infra import plan as planner
from infra.k8s import autoscaling
from infra.k8s.serving import WORKING_HOURS


def test_keda_scaled_object_replaces_the_hpa_in_dev() -> None:
    cfg = planner.load_stack("gcp-dev")
    cfg = dataclasses.replace(
        cfg, serving=dataclasses.replace(cfg.serving, scale_to_zero=True, min_replicas=0)
    )
    p = Plan(planner.run(cfg, planner.stack_config("gcp-dev")))
    assert p.of_type("kubernetes:autoscaling/v2:HorizontalPodAutoscaler") == []
    scaled = p.one("kubernetes:keda.sh/v1alpha1:ScaledObject")
    spec = scaled["inputs"]["spec"]
    assert spec["minReplicaCount"] == 0.0 and spec["maxReplicaCount"] == cfg.serving.max_replicas
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"}
    prometheus, cron = spec["triggers"]
    assert prometheus["type"] == "prometheus"
    assert prometheus["metadata"]["query"] == autoscaling.keda_query("serving", "triton")
    assert (
        autoscaling.per_pod_queue_time("pod", 'namespace="serving",pod=~"triton-.*"')
        in prometheus["metadata"]["query"]
    )
    assert prometheus["metadata"]["threshold"] == str(cfg.serving.queue_time_target_us)
    assert cron == {"type": "cron", "metadata": {**WORKING_HOURS, "desiredReplicas": "1"}}
    keda = [r for r in p.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "keda"]
    assert len(keda) == 1
    # The ScaledObject waits for the add-ons (its CRD comes with the KEDA chart).
    assert keda[0]["urn"] in scaled["dependencies"]
