"""Dev scale-to-zero: a KEDA ScaledObject on the same queue-time query replaces the HPA."""

from __future__ import annotations

from infra_fixtures import Plan

from infra import plan as planner


def test_keda_scaled_object_replaces_the_hpa_in_dev() -> None:
    cfg = planner.load_stack("gcp-dev")
    cfg = cfg.model_copy(
        update={"serving": cfg.serving.model_copy(update={"scale_to_zero": True, "min_replicas": 0})}
    )
    p = Plan(planner.run(cfg, planner.stack_config("gcp-dev")))
    assert p.of_type("kubernetes:autoscaling/v2:HorizontalPodAutoscaler") == []
    scaled = p.one("kubernetes:keda.sh/v1alpha1:ScaledObject")
    spec = scaled["inputs"]["spec"]
    assert spec["minReplicaCount"] == 0.0 and spec["maxReplicaCount"] == cfg.serving.max_replicas
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"}
    prometheus, cron = spec["triggers"]
    assert prometheus["type"] == "prometheus"
    # The HPA's query with the deployment's pods filled in, averaged: one number for KEDA.
    matchers = 'model="sentiment",namespace="serving",pod=~"triton-.*"'
    assert prometheus["metadata"]["query"] == (
        f"avg(sum by (pod)(rate(nv_inference_queue_duration_us{{{matchers}}}[1m])) / clamp_min(sum by (pod)"
        f'(rate({{__name__=~"nv_inference_request_success|nv_inference_request_failure",{matchers}}}[1m])), 0.001))'
    )
    assert prometheus["metadata"]["threshold"] == "20000"
    assert cron == {
        "type": "cron",
        "metadata": {
            "timezone": "Europe/Madrid",
            "start": "0 8 * * 1-5",
            "end": "0 20 * * 1-5",
            "desiredReplicas": "1",
        },
    }
    keda = [r for r in p.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "keda"]
    assert len(keda) == 1
    # The ScaledObject waits for the add-ons (its CRD comes with the KEDA chart).
    assert keda[0]["urn"] in scaled["dependencies"]
