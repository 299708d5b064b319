"""Versions tied to the cluster's Kubernetes minor (pure, no Pulumi): one table per component.

cluster-autoscaler simulates the scheduler of the Kubernetes minor it was built for, and its project
supports only the matching minor ("We recommend using Cluster Autoscaler with the Kubernetes control
plane version for which it was meant", kubernetes/autoscaler cluster-autoscaler/README.md, Releases).
The README's table gives the first chart release of each minor; the image tag pins the patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AutoscalerRelease:
    chart: str  # kubernetes.github.io/autoscaler `cluster-autoscaler` chart version
    image_tag: str  # registry.k8s.io/autoscaling/cluster-autoscaler:<tag>


# Kubernetes minor -> the chart of that autoscaler minor (README: 1.31 9.38.0+, 1.32 9.45.0+, 1.33 9.47.0+,
# 1.34 9.51.0+) and the newest patch image of that minor published when this table was last updated.
CLUSTER_AUTOSCALER: Mapping[str, AutoscalerRelease] = {
    "1.31": AutoscalerRelease(chart="9.43.2", image_tag="v1.31.2"),
    "1.32": AutoscalerRelease(chart="9.46.6", image_tag="v1.32.3"),
    "1.33": AutoscalerRelease(chart="9.47.0", image_tag="v1.33.5"),
    "1.34": AutoscalerRelease(chart="9.51.0", image_tag="v1.34.3"),
}


def cluster_autoscaler(kubernetes_version: str) -> AutoscalerRelease:
    """The autoscaler release for a cluster minor; config.parse refuses minors this table lacks."""
    return CLUSTER_AUTOSCALER[kubernetes_version]
