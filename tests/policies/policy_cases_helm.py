"""Issue-12 mutants for Helm releases whose chart values expose a service (public load balancer or
ingress) or keep it internal.

policy_cases.py gathers them with the other sections for test_policy_rules.py.
"""

from __future__ import annotations

import policy_fixtures as fx
from policy_mutators import Case, add

HELM = "kubernetes:helm.sh/v3:Release"

CASES: list[Case] = [
    (
        "helm-chart-public-lb",
        fx.gcp_stack,
        add(
            HELM,
            "grafana",
            {
                "chart": "grafana",
                "version": "8.5.1",
                "repositoryOpts": {"repo": "https://grafana.github.io/helm-charts"},
                "values": {"service": {"type": "LoadBalancer"}},
            },
        ),
        {("k8s-no-public-service", "grafana")},
    ),
    (
        "helm-chart-internal-lb-ok",
        fx.gcp_stack,
        add(
            HELM,
            "grafana",
            {
                "chart": "grafana",
                "version": "8.5.1",
                "repositoryOpts": {"repo": "https://grafana.github.io/helm-charts"},
                "values": {
                    "service": {
                        "type": "LoadBalancer",
                        "annotations": {"networking.gke.io/load-balancer-type": "Internal"},
                    }
                },
            },
        ),
        set(),
    ),
    (
        "helm-chart-public-ingress",
        fx.azure_stack,
        add(
            HELM,
            "argo",
            {
                "chart": "argo-workflows",
                "version": "0.45.0",
                "repositoryOpts": {"repo": "https://argoproj.github.io/argo-helm"},
                "values": {"server": {"ingress": {"enabled": True}}},
            },
        ),
        {("k8s-no-public-service", "argo")},
    ),
]
