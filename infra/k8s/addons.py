"""Cluster add-ons: the cloud's own charts (autoscaler, spot handling), NVIDIA's device plugin, and the
Prometheus + Prometheus-adapter pair that feeds Triton's queue time to the HPA."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from infra.k8s import autoscaling
from infra.shape import POOL_SELECTORS, HelmChart, PoolSelector

MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_RELEASE = "prometheus"
# The prometheus chart names its server Service `<release>-server`, port 80.
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-server.{MONITORING_NAMESPACE}.svc"


def device_plugin(gpu_pool: PoolSelector) -> HelmChart:
    """NVIDIA's device plugin advertises `nvidia.com/gpu` on the GPU pool's nodes (and only there)."""
    return HelmChart(
        name="nvidia-device-plugin",
        chart="nvidia-device-plugin",
        repo="https://nvidia.github.io/k8s-device-plugin",
        version="0.17.0",
        namespace="kube-system",
        values={
            "nodeSelector": dict(gpu_pool.node_selector),
            "tolerations": [dict(t) for t in gpu_pool.tolerations],
        },
    )


def monitoring_charts(retention_days: int) -> list[HelmChart]:
    system = dict(POOL_SELECTORS["system"].node_selector)
    return [
        # Only the server: it scrapes pods annotated `prometheus.io/scrape` (Triton's :8002/metrics).
        HelmChart(
            name=PROMETHEUS_RELEASE,
            chart="prometheus",
            repo="https://prometheus-community.github.io/helm-charts",
            version="25.27.0",
            namespace=MONITORING_NAMESPACE,
            values={
                "alertmanager": {"enabled": False},
                "prometheus-pushgateway": {"enabled": False},
                "server": {"retention": f"{retention_days}d", "nodeSelector": system},
            },
        ),
        HelmChart(
            name="prometheus-adapter",
            chart="prometheus-adapter",
            repo="https://prometheus-community.github.io/helm-charts",
            version="4.11.0",
            namespace=MONITORING_NAMESPACE,
            values={
                "prometheus": {
                    "url": f"http://{PROMETHEUS_RELEASE}-server.{MONITORING_NAMESPACE}.svc",
                    "port": 80,
                },
                "nodeSelector": system,
                "rules": {"default": False, "custom": [autoscaling.adapter_rule()]},
            },
        ),
    ]


KEDA = HelmChart(
    name="keda",
    chart="keda",
    repo="https://kedacore.github.io/charts",
    version="2.16.0",
    namespace="keda",
    values={"nodeSelector": dict(POOL_SELECTORS["system"].node_selector)},
)


class ClusterAddons(pulumi.ComponentResource):
    releases: dict[str, k8s.helm.v3.Release]

    def __init__(self, name: str, charts: Sequence[HelmChart], opts: pulumi.ResourceOptions) -> None:
        super().__init__("eu-ml-platform:k8s:ClusterAddons", name, None, opts)
        self.releases = {}
        namespaces: dict[str, k8s.core.v1.Namespace] = {}
        for chart in charts:
            depends: list[pulumi.Resource] = []
            if chart.namespace not in ("kube-system", "default"):
                if chart.namespace not in namespaces:
                    namespaces[chart.namespace] = k8s.core.v1.Namespace(
                        f"{name}-{chart.namespace}",
                        metadata=k8s.meta.v1.ObjectMetaArgs(
                            name=chart.namespace, labels={"app.kubernetes.io/managed-by": "pulumi"}
                        ),
                        opts=pulumi.ResourceOptions(parent=self),
                    )
                depends.append(namespaces[chart.namespace])
            self.releases[chart.name] = k8s.helm.v3.Release(
                f"{name}-{chart.name}",
                name=chart.name,
                chart=chart.chart,
                version=chart.version,
                namespace=chart.namespace,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
                values=dict(chart.values),
                atomic=True,
                opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
            )
        self.register_outputs({})
