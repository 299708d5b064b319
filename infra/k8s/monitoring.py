"""Model and platform monitoring on the cluster (issue 13), the pure part: what the repository's
monitoring/ package provides (alert rules, dashboards, Alertmanager's routing), turned into chart values
and documents; the charts that need no objects of ours (Grafana, NVIDIA's DCGM exporter); and the
fsspec URLs the serving models and the drift job write to. No Pulumi resources here
(`monitoring_stack.py` declares them).

Prometheus is the `prometheus` chart (infra/k8s/addons.py), not the operator: rules go into its
`serverFiles` (no PrometheusRule CRD exists on the cluster), alerts go to our Alertmanager
(`monitoring_stack.py`, config from a Secret), and its Pushgateway receives the drift job's gauges.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from infra.config import PlatformConfig
from infra.k8s.workflow_state import kube_state_metrics_values
from infra.shape import POOL_SELECTORS, HelmChart, PoolSelector

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "monitoring" / "rules"
DASHBOARDS_DIR = ROOT / "monitoring" / "dashboards"

MONITORING_NAMESPACE = "monitoring"
ALERTMANAGER = "alertmanager"
ALERTMANAGER_PORT = 9093
ALERTMANAGER_CONFIG_SECRET = "alertmanager-config"
# The prometheus chart's Pushgateway subchart: Service `<release>-prometheus-pushgateway`, port 9091.
PUSHGATEWAY_PORT = 9091
PUSHGATEWAY_URL = f"http://prometheus-prometheus-pushgateway.{MONITORING_NAMESPACE}.svc:{PUSHGATEWAY_PORT}"
# The Pushgateway keeps what was pushed in memory only: a restart (node drained, OOM, chart upgrade) lost every group,
# so a hung training run that stamped before it was no longer judged by TrainingNoProgress, and the drift and budget
# gauges were gone until the next daily or hourly run. It writes its groups to this file on the subchart's volume
# (persistentVolume, mounted at PUSHGATEWAY_DATA_DIR) every PUSHGATEWAY_PERSIST_INTERVAL and on shutdown, and reads it
# back at start. One minute: a crash (no SIGTERM) loses at most the last minute's pushes; the file is kilobytes.
PUSHGATEWAY_DATA_DIR = "/data"
PUSHGATEWAY_PERSIST_INTERVAL = "1m"
# The label (and value) Grafana's dashboard sidecar watches for.
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
# Plan-visible record of where alerts go (receiver names, never keys): the policy pack reads these.
RECEIVERS_ANNOTATION = "platform.eu-ml/alert-receivers"
PAGING_ANNOTATION = "platform.eu-ml/paging"
PAGERS = ("pagerduty", "opsgenie")
# What the offline plan's alertmanager.yml pings for a heartbeat URL it cannot decrypt (RFC 2606: never resolves).
UNKNOWN_HEARTBEAT_URL = "https://heartbeat.invalid/unknown-at-preview"


# What only the stack knows, as a series the repository's rules read: the environment whose retraining pipeline it
# deploys. RetrainingPipelineAbsent (monitoring/rules/training.yaml) fires for it when kube-state-metrics sees neither
# its WorkflowTemplate nor its CronWorkflow; deleted together they leave no other series that could say so.
PIPELINE_DECLARED = "stack:retraining_pipeline:declared"
STACK_GROUP = "stack"


def alert_rule_groups(
    rules_dir: Path = RULES_DIR, *, pipeline_environment: str | None = None
) -> list[dict[str, Any]]:
    """Every rule group of monitoring/rules/*.yaml (Prometheus's `groups:` format), in file order; then, for a stack
    that deploys the retraining pipeline of `pipeline_environment`, the group declaring it (PIPELINE_DECLARED)."""
    groups: list[dict[str, Any]] = []
    for path in sorted(rules_dir.glob("*.yaml")):
        document = yaml.safe_load(path.read_text()) or {}
        groups.extend(document.get("groups") or [])
    if pipeline_environment is not None:
        groups.append(stack_rule_group(pipeline_environment))
    return groups


def stack_rule_group(pipeline_environment: str) -> dict[str, Any]:
    """The stack's own recording rule: one constant series naming the environment whose pipeline it deploys."""
    return {
        "name": STACK_GROUP,
        "rules": [
            {
                "record": PIPELINE_DECLARED,
                "expr": "vector(1)",
                "labels": {"environment": pipeline_environment},
            }
        ],
    }


def dashboards(dashboards_dir: Path = DASHBOARDS_DIR) -> dict[str, str]:
    """Dashboard file stem -> its JSON text (validated as JSON here, so a broken file fails the plan)."""
    return {
        path.stem: json.dumps(json.loads(path.read_text()), sort_keys=True)
        for path in sorted(dashboards_dir.glob("*.json"))
    }


def alertmanager_document(cfg: PlatformConfig) -> dict[str, Any]:
    """alertmanager.yml from monitoring/alerting.py: severity routing to the pagers configured; a stack without
    one (dev, staging) sends everything to email, with the same grouping and inhibit rules. Watchdog pings
    monitoring.heartbeatUrl, or reaches no one without it."""
    from infra.plan_mocks import UNKNOWN
    from monitoring.alerting import alertmanager_config

    m = cfg.monitoring
    heartbeat = m.heartbeat_url.get_secret_value() if m.heartbeat_url else None
    if heartbeat == UNKNOWN:
        # The offline plan reads a `secure:` value as unknown and never shows this document (a Pulumi secret): a
        # stand-in URL renders the same routes. `pulumi up` has the decrypted one.
        heartbeat = UNKNOWN_HEARTBEAT_URL
    return alertmanager_config(
        pagerduty_routing_key=m.pagerduty_routing_key.get_secret_value() if m.pagerduty_routing_key else None,
        opsgenie_api_key=m.opsgenie_api_key.get_secret_value() if m.opsgenie_api_key else None,
        email_to=list(cfg.alert_emails),
        email_from=m.email_from,
        smarthost=m.smarthost,
        require_pager=False,
        heartbeat_url=heartbeat,
    )


def receiver_annotations(cfg: PlatformConfig) -> dict[str, str]:
    receivers = sorted(cfg.monitoring.receivers)
    return {
        RECEIVERS_ANNOTATION: ",".join(receivers),
        PAGING_ANNOTATION: "true" if set(receivers) & set(PAGERS) else "false",
    }


def prometheus_values(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """What the prometheus chart adds for alerting: the rules, our Alertmanager, its Pushgateway, and the Argo
    Workflow series of kube-state-metrics that the retraining alerts read (infra/k8s/workflow_state.py)."""
    target = f"{ALERTMANAGER}.{MONITORING_NAMESPACE}.svc:{ALERTMANAGER_PORT}"
    return {
        "serverFiles": {"alerting_rules.yml": {"groups": groups}},
        "server": {"alertmanagers": [{"static_configs": [{"targets": [target]}]}]},
        "prometheus-pushgateway": {
            "enabled": True,
            "nodeSelector": dict(POOL_SELECTORS["system"].node_selector),
            **pushgateway_persistence(),
        },
        "kube-state-metrics": kube_state_metrics_values(),
    }


def pushgateway_persistence() -> dict[str, Any]:
    """The Pushgateway subchart's values that keep its groups across restarts: a volume (the chart's own PVC, the
    cluster's default StorageClass, 2Gi: the file is kilobytes) and the gateway's flags that write and read the file on
    it. Recreate (the subchart's default, set here as the volume depends on it): the old pod releases the ReadWriteOnce
    volume before the new one mounts it; a rolling update's new pod on another node would stall on the attach."""
    return {
        "persistentVolume": {"enabled": True, "mountPath": PUSHGATEWAY_DATA_DIR, "size": "2Gi"},
        "strategy": {"type": "Recreate"},
        "extraArgs": [
            f"--persistence.file={PUSHGATEWAY_DATA_DIR}/pushgateway.data",
            f"--persistence.interval={PUSHGATEWAY_PERSIST_INTERVAL}",
        ],
    }


def grafana_chart() -> HelmChart:
    """Grafana with its dashboard sidecar: every ConfigMap labelled DASHBOARD_LABEL in the monitoring
    namespace becomes a dashboard; the datasource is the in-cluster Prometheus."""
    ((label, value),) = DASHBOARD_LABEL.items()
    return HelmChart(
        name="grafana",
        chart="grafana",
        repo="https://grafana.github.io/helm-charts",
        version="8.5.1",
        namespace=MONITORING_NAMESPACE,
        values={
            "nodeSelector": dict(POOL_SELECTORS["system"].node_selector),
            "sidecar": {
                "dashboards": {
                    "enabled": True,
                    "label": label,
                    "labelValue": value,
                    "searchNamespace": MONITORING_NAMESPACE,
                }
            },
            "datasources": {
                "datasources.yaml": {
                    "apiVersion": 1,
                    "datasources": [
                        {
                            "name": "Prometheus",
                            "uid": "prometheus",
                            "type": "prometheus",
                            "url": f"http://prometheus-server.{MONITORING_NAMESPACE}.svc",
                            "access": "proxy",
                            "isDefault": True,
                        }
                    ],
                }
            },
            # Reached with `kubectl port-forward` (infra/README.md): no Service outside the cluster.
            "service": {"type": "ClusterIP"},
        },
    )


def dcgm_exporter_chart(gpu_pool: PoolSelector) -> HelmChart:
    """NVIDIA's DCGM exporter on the GPU pool's nodes only (utilisation, memory, power per GPU), scraped by
    the prometheus chart through the pod annotations; no ServiceMonitor (no operator CRDs here)."""
    return HelmChart(
        name="dcgm-exporter",
        chart="dcgm-exporter",
        repo="https://nvidia.github.io/dcgm-exporter/helm-charts",
        version="4.8.2",
        namespace=MONITORING_NAMESPACE,
        values={
            "nodeSelector": dict(gpu_pool.node_selector),
            "tolerations": [dict(t) for t in gpu_pool.tolerations],
            "serviceMonitor": {"enabled": False},
            "podAnnotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9400"},
        },
    )


def fsspec_url(bucket_uri: str, prefix: str) -> str:
    """A bucket URI (stack output form) and a prefix -> the fsspec URL the monitoring code opens:
    `s3://b/inference`, `gs://b/inference`, and on Azure adlfs's documented form with the account in it,
    `abfs://<container>@<account>.dfs.core.windows.net/inference` (models and logs live in different
    storage accounts, so one account in the environment would not do)."""
    path = prefix.strip("/")
    if bucket_uri.startswith(("s3://", "gs://")):
        return f"{bucket_uri.rstrip('/')}/{path}"
    parsed = urlparse(bucket_uri)
    if parsed.scheme == "https" and parsed.hostname and parsed.hostname.endswith(".blob.core.windows.net"):
        account = parsed.hostname.split(".")[0]
        return f"abfs://{parsed.path.strip('/')}@{account}.dfs.core.windows.net/{path}"
    raise ValueError(
        f"bucket URI {bucket_uri!r}: expected s3://, gs:// or https://<account>.blob.core.windows.net/"
    )


def storage_env(bucket_uris: Mapping[str, str]) -> dict[str, str]:
    """Extra environment the fsspec backend needs: adlfs signs in with DefaultAzureCredential (the
    workload identity token) only when it is not anonymous; S3 and GCS need nothing."""
    host = urlparse(bucket_uris["logs"]).hostname or ""
    if host.endswith(".blob.core.windows.net"):
        return {"AZURE_STORAGE_ANON": "false"}
    return {}
