"""The compliant Kubernetes serving workload a fixture stack deploys onto its cluster.

Deployment, autoscaler, disruption budget, default-deny network policy and the Alertmanager secret
whose annotations carry infra's alert-routing contract (issue 13); the image is digest-pinned in prod.
"""

from __future__ import annotations

from typing import Any

from policy_fixtures_base import res


def k8s_serving(stack: str, environment: str) -> list[dict[str, Any]]:
    labels = {"app": "sentiment"}
    image = "registry.example.eu/serving:0.1.0-abc1234" + (
        "@sha256:" + "a" * 64 if environment == "prod" else ""
    )
    container = {
        "name": "triton",
        "image": image,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000.0,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
        },
        "resources": {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}},
        "readinessProbe": {"httpGet": {"path": "/v2/health/ready", "port": 8000.0}},
        "livenessProbe": {"httpGet": {"path": "/v2/health/live", "port": 8000.0}},
    }
    dep = res(
        stack,
        "kubernetes:apps/v1:Deployment",
        "sentiment",
        {
            "metadata": {
                "name": "sentiment",
                "namespace": "serving",
                "labels": {**labels, "environment": environment},
            },
            "spec": {
                "replicas": 2.0,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        },
    )
    return [
        dep,
        res(
            stack,
            "kubernetes:autoscaling/v2:HorizontalPodAutoscaler",
            "sentiment",
            {
                "metadata": {"name": "sentiment", "namespace": "serving"},
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "sentiment"},
                    "minReplicas": 2.0,
                    "maxReplicas": 6.0,
                },
            },
        ),
        res(
            stack,
            "kubernetes:policy/v1:PodDisruptionBudget",
            "sentiment",
            {
                "metadata": {"name": "sentiment", "namespace": "serving"},
                "spec": {"minAvailable": 1.0, "selector": {"matchLabels": labels}},
            },
        ),
        res(
            stack,
            "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            "serving-default-deny",
            {
                "metadata": {"name": "default-deny", "namespace": "serving"},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
            },
        ),
        res(
            stack,
            "kubernetes:core/v1:Secret",
            "alertmanager-config",
            {
                "metadata": {
                    "name": "alertmanager-config",
                    "namespace": "monitoring",
                    # infra's contract (issue 13): receiver names and whether a pager is configured.
                    "annotations": {
                        "platform.eu-ml/alert-receivers": "email,pagerduty"
                        if environment == "prod"
                        else "email",
                        "platform.eu-ml/paging": "true" if environment == "prod" else "false",
                    },
                },
                "stringData": {
                    "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                    "value": "[secret]",
                },
            },
        ),
    ]
