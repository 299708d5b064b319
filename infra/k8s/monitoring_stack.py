"""Monitoring objects of ours on the cluster (issue 13): Alertmanager (config from a Secret, routed by
severity), the Grafana dashboards as ConfigMaps, and the drift CronJob with its own identity and
NetworkPolicy. The charts (Prometheus + rules + Pushgateway, Grafana, DCGM exporter) are add-ons."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.k8s import push_job
from infra.k8s.monitoring import (
    ALERTMANAGER,
    ALERTMANAGER_CONFIG_SECRET,
    ALERTMANAGER_PORT,
    DASHBOARD_LABEL,
    MONITORING_NAMESPACE,
)
from infra.k8s.netpol import dns_egress, identity_and_https_egress
from infra.k8s.push_job import hardened, pod_security
from infra.shape import POOL_SELECTORS, SERVICE_ACCOUNTS

# One Alertmanager replica: notifications are idempotent per group, and silences live on a small
# volume so a restart keeps them. Its image is `monitoring.alertmanagerImage` (digest-pinned in prod).
ALERTMANAGER_STORAGE = "1Gi"
# Outbound for notifications: PagerDuty and Opsgenie APIs (HTTPS) and the SMTP relay (submission port).
NOTIFY_PORTS = (443, 587)
NOBODY = 65534
# The drift job: a window of records and the reference fit in memory on the system pool; an hour is
# ten times what 10,000 records take (monitoring/README.md).
DRIFT_RESOURCES = {"cpu": "1", "memory": "2Gi"}
DRIFT_DEADLINE_S = 3600


@dataclass(frozen=True, slots=True)
class MonitoringArgs:
    # alertmanager.yml as a Pulumi secret, and the receiver annotations (names only) shown in the plan.
    alertmanager_config: pulumi.Input[str]
    receiver_annotations: Mapping[str, str]
    alertmanager_image: str
    dashboards: Mapping[str, str]
    # The drift CronJob: the training image, its schedule and the three fsspec URLs it reads and writes.
    image: pulumi.Input[str]
    schedule: str
    # `--window` of each run (python -m monitoring drift): the records of that long before the run.
    window: str
    reference_url: pulumi.Input[str]
    current_url: pulumi.Input[str]
    out_url: pulumi.Input[str]
    # The `model` label of the drift gauges (ModelInputDrift names it): the stack's retraining.model.
    model: str
    storage_env: Mapping[str, str] = field(default_factory=dict)
    sa_annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    identity_egress: tuple[Mapping[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    # The add-ons: the monitoring namespace and the Pushgateway exist first.
    after: tuple[pulumi.Resource, ...] = ()


class MonitoringStack(pulumi.ComponentResource):
    alertmanager_secret: k8s.core.v1.Secret
    cron_job: k8s.batch.v1.CronJob

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions) -> None:
        super().__init__("eu-ml-platform:k8s:Monitoring", name, None, opts)
        labels = {"app.kubernetes.io/part-of": "eu-ml-platform", **args.labels}
        in_monitoring = pulumi.ResourceOptions(parent=self, depends_on=list(args.after))
        self._alertmanager(name, args, labels, in_monitoring)
        for stem, text in args.dashboards.items():
            k8s.core.v1.ConfigMap(
                f"{name}-dashboard-{stem}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=f"grafana-dashboard-{stem}",
                    namespace=MONITORING_NAMESPACE,
                    labels={**labels, **DASHBOARD_LABEL},
                ),
                data={f"{stem}.json": text},
                opts=in_monitoring,
            )
        self._drift_job(name, args, labels)
        self.register_outputs({})

    def _alertmanager(
        self, name: str, args: MonitoringArgs, labels: dict[str, str], opts: pulumi.ResourceOptions
    ) -> None:
        selector = {"app.kubernetes.io/name": ALERTMANAGER}
        meta = k8s.meta.v1.ObjectMetaArgs(
            name=ALERTMANAGER, namespace=MONITORING_NAMESPACE, labels={**labels, **selector}
        )
        # The rendered config holds the pager keys: a Secret (KMS-encrypted at rest on every cluster),
        # its data a Pulumi secret; the receivers' names are annotations anyone may read.
        self.alertmanager_secret = k8s.core.v1.Secret(
            f"{name}-alertmanager-config",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=ALERTMANAGER_CONFIG_SECRET,
                namespace=MONITORING_NAMESPACE,
                labels=labels,
                annotations=dict(args.receiver_annotations),
            ),
            type="Opaque",
            string_data={"alertmanager.yml": pulumi.Output.secret(args.alertmanager_config)},
            opts=opts,
        )
        port = k8s.core.v1.ContainerPortArgs(name="http", container_port=ALERTMANAGER_PORT)
        probe = k8s.core.v1.ProbeArgs(
            http_get=k8s.core.v1.HTTPGetActionArgs(path="/-/ready", port="http"), period_seconds=10
        )
        k8s.apps.v1.StatefulSet(
            f"{name}-alertmanager",
            metadata=meta,
            spec=k8s.apps.v1.StatefulSetSpecArgs(
                replicas=1,
                service_name=ALERTMANAGER,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels={**labels, **selector}),
                    spec=k8s.core.v1.PodSpecArgs(
                        automount_service_account_token=False,
                        security_context=pod_security(NOBODY),
                        node_selector=dict(POOL_SELECTORS["system"].node_selector),
                        containers=[
                            k8s.core.v1.ContainerArgs(
                                name=ALERTMANAGER,
                                image=args.alertmanager_image,
                                args=[
                                    "--config.file=/etc/alertmanager/alertmanager.yml",
                                    "--storage.path=/alertmanager",
                                    # One replica: no gossip port to open.
                                    "--cluster.listen-address=",
                                ],
                                ports=[port],
                                readiness_probe=probe,
                                liveness_probe=probe,
                                resources=k8s.core.v1.ResourceRequirementsArgs(
                                    requests={"cpu": "50m", "memory": "64Mi"},
                                    limits={"cpu": "200m", "memory": "256Mi"},
                                ),
                                security_context=hardened(),
                                volume_mounts=[
                                    k8s.core.v1.VolumeMountArgs(
                                        name="config", mount_path="/etc/alertmanager", read_only=True
                                    ),
                                    k8s.core.v1.VolumeMountArgs(name="data", mount_path="/alertmanager"),
                                ],
                            )
                        ],
                        volumes=[
                            k8s.core.v1.VolumeArgs(
                                name="config",
                                secret=k8s.core.v1.SecretVolumeSourceArgs(
                                    secret_name=ALERTMANAGER_CONFIG_SECRET
                                ),
                            )
                        ],
                    ),
                ),
                volume_claim_templates=[
                    k8s.core.v1.PersistentVolumeClaimArgs(
                        metadata=k8s.meta.v1.ObjectMetaArgs(name="data"),
                        spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                            access_modes=["ReadWriteOnce"],
                            resources=k8s.core.v1.VolumeResourceRequirementsArgs(
                                requests={"storage": ALERTMANAGER_STORAGE}
                            ),
                        ),
                    )
                ],
            ),
            opts=pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(depends_on=[self.alertmanager_secret])
            ),
        )
        k8s.core.v1.Service(
            f"{name}-alertmanager-service",
            metadata=meta,
            spec=k8s.core.v1.ServiceSpecArgs(
                type="ClusterIP",
                selector=selector,
                ports=[k8s.core.v1.ServicePortArgs(name="http", port=ALERTMANAGER_PORT, target_port="http")],
            ),
            opts=opts,
        )
        # Only Prometheus (same namespace) reaches Alertmanager; it reaches DNS and the notifiers only.
        k8s.networking.v1.NetworkPolicy(
            f"{name}-alertmanager-netpol",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=ALERTMANAGER, namespace=MONITORING_NAMESPACE),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                policy_types=["Ingress", "Egress"],
                ingress=[
                    k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                        from_=[
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                pod_selector=k8s.meta.v1.LabelSelectorArgs()
                            )
                        ],
                        ports=[
                            k8s.networking.v1.NetworkPolicyPortArgs(port=ALERTMANAGER_PORT, protocol="TCP")
                        ],
                    )
                ],
                egress=[dns_egress(), *identity_and_https_egress((), ports=NOTIFY_PORTS)],
            ),
            opts=opts,
        )

    def _drift_job(self, name: str, args: MonitoringArgs, labels: dict[str, str]) -> None:
        self.cron_job = push_job.declare(
            push_job.PushJob(
                name="drift",
                args=[
                    "--reference",
                    pulumi.Output.concat(args.reference_url, "/"),
                    "--current",
                    pulumi.Output.concat(args.current_url, "/"),
                    "--out",
                    pulumi.Output.concat(args.out_url, "/"),
                    "--window",
                    args.window,
                    "--model",
                    args.model,
                ],  # fmt: skip
                image=args.image,
                schedule=args.schedule,
                deadline_s=DRIFT_DEADLINE_S,
                resources=DRIFT_RESOURCES,
                scratch="2Gi",
                service_account=SERVICE_ACCOUNTS["monitor"],
                env=args.storage_env,
                sa_annotations=args.sa_annotations,
                pod_labels=args.pod_labels,
                identity_egress=args.identity_egress,
            ),
            push_job.ResourceNames(
                namespace=f"{name}-drift-ns",
                service_account=f"{name}-monitor-sa",
                cron_job=f"{name}-drift",
            ),
            labels,
            pulumi.ResourceOptions(parent=self),
            args.after,
        )
