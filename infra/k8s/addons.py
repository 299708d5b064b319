"""Cluster add-ons: the cloud's own charts (autoscaler, spot handling), NVIDIA's device plugin, and the
Prometheus + Prometheus-adapter pair that feeds Triton's queue time to the HPA."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.config import PlatformConfig
from infra.k8s import autoscaling
from infra.shape import POOL_SELECTORS, HelmChart, PoolSelector

MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_RELEASE = "prometheus"
# The prometheus chart names its server Service `<release>-server`, port 80.
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-server.{MONITORING_NAMESPACE}.svc"

# The in-cluster Prometheus serves the autoscaler and recent debugging, not history: 15 days (Prometheus's
# own default). Audit trails live in the cloud's audit logs (auditRetentionDays); long-term metrics, if
# wanted, belong in the cloud's managed Prometheus through remote_write (infra/README.md).
METRICS_RETENTION_DAYS = 15
# Active series per source (order of magnitude, measured on comparable clusters): node-exporter plus
# kubelet/cAdvisor per node, Triton per pod (4 models x 2 versions x ~30 series), and the cluster-wide
# rest (API server histograms, kube-state-metrics).
SERIES_PER_NODE, SERIES_PER_TRITON_POD, SERIES_CLUSTER = 1_500, 300, 15_000
# Prometheus storage guide: disk = retention seconds x samples/s x bytes per sample (1-2 after compression);
# 1.5x covers the WAL and compaction, and the chart's 8Gi default is the floor.
BYTES_PER_SAMPLE, HEADROOM, MIN_VOLUME_GI = 2, 1.5, 8


@dataclass(frozen=True, slots=True)
class PrometheusStorage:
    retention_days: int
    volume_gi: int
    # Prometheus deletes the oldest blocks beyond this, so the volume never fills whatever the estimate.
    retention_size_gb: int


def prometheus_storage(
    cfg: PlatformConfig, retention_days: int = METRICS_RETENTION_DAYS
) -> PrometheusStorage:
    """Size the server's volume from retention and scrape volume (all pools at their maximum)."""
    cl = cfg.cluster
    nodes = cl.system_pool.max_nodes + cl.serving_pool.max_nodes + cl.gpu_pool.max_nodes
    series = nodes * SERIES_PER_NODE + cfg.serving.max_replicas * SERIES_PER_TRITON_POD + SERIES_CLUSTER
    samples_per_s = series / autoscaling.SCRAPE_INTERVAL_S
    needed = retention_days * 86_400 * samples_per_s * BYTES_PER_SAMPLE * HEADROOM
    volume = max(MIN_VOLUME_GI, math.ceil(needed / 2**30))
    return PrometheusStorage(retention_days, volume, int(volume * 2**30 * 0.8 / 1e9))


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


def monitoring_charts(
    storage: PrometheusStorage, alerting: Mapping[str, Any] | None = None
) -> list[HelmChart]:
    """The Prometheus server and the adapter; `alerting` (infra/k8s/monitoring.py, prometheus_values)
    adds the alert rules, the Alertmanager target and the Pushgateway to the server's chart."""
    system = dict(POOL_SELECTORS["system"].node_selector)
    extra = dict(alerting or {})
    server_extra = extra.pop("server", {})
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
                "server": {
                    # The adapter's rate window is derived from this interval (infra/k8s/autoscaling.py).
                    "global": {
                        "scrape_interval": autoscaling.SCRAPE_INTERVAL,
                        "evaluation_interval": autoscaling.SCRAPE_INTERVAL,
                    },
                    "retention": f"{storage.retention_days}d",
                    "retentionSize": f"{storage.retention_size_gb}GB",
                    "persistentVolume": {"enabled": True, "size": f"{storage.volume_gi}Gi"},
                    "nodeSelector": system,
                    **server_extra,
                },
                **extra,
            },
        ),
        HelmChart(
            name="prometheus-adapter",
            chart="prometheus-adapter",
            repo="https://prometheus-community.github.io/helm-charts",
            version="4.11.0",
            namespace=MONITORING_NAMESPACE,
            values={
                "prometheus": {"url": PROMETHEUS_URL, "port": 80},
                # How often the adapter re-lists series: a new pod's metric appears within one interval.
                "metricsRelistInterval": autoscaling.SCRAPE_INTERVAL,
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

    def __init__(
        self,
        name: str,
        charts: Sequence[HelmChart],
        opts: pulumi.ResourceOptions,
        after: Sequence[pulumi.Resource] = (),
    ) -> None:
        """`after`: what every release waits for (the default StorageClass the Prometheus server's PVC uses)."""
        super().__init__("eu-ml-platform:k8s:ClusterAddons", name, None, opts)
        self.releases = {}
        namespaces: dict[str, k8s.core.v1.Namespace] = {}
        for chart in charts:
            depends: list[pulumi.Resource] = list(after)
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
