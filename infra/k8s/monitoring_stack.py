"""Monitoring objects of ours on the cluster (issue 13): Alertmanager (config from a Secret, routed by
severity), the Grafana dashboards as ConfigMaps, and the drift CronJob with its own identity and
NetworkPolicy. The charts (Prometheus + rules + Pushgateway, Grafana, DCGM exporter) are add-ons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.k8s.monitoring import (
    ALERTMANAGER,
    ALERTMANAGER_CONFIG_SECRET,
    ALERTMANAGER_PORT,
    DASHBOARD_LABEL,
    MONITORING_NAMESPACE,
    PUSHGATEWAY_PORT,
    PUSHGATEWAY_URL,
)
from infra.k8s.netpol import dns_egress, identity_and_https_egress
from infra.k8s.serving import RESTRICTED
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
    reference_url: pulumi.Input[str]
    current_url: pulumi.Input[str]
    out_url: pulumi.Input[str]
    storage_env: Mapping[str, str] = field(default_factory=dict)
    sa_annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    identity_egress: tuple[Mapping[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    # The add-ons: the monitoring namespace and the Pushgateway exist first.
    after: tuple[pulumi.Resource, ...] = ()


def hardened() -> k8s.core.v1.SecurityContextArgs:
    """The container security context of every job here (and infra/k8s/budget.py): Pod Security "restricted"."""
    return k8s.core.v1.SecurityContextArgs(
        run_as_non_root=True,
        read_only_root_filesystem=True,
        allow_privilege_escalation=False,
        capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
    )


def pod_security(user: int) -> k8s.core.v1.PodSecurityContextArgs:
    """The pod security context those jobs share: non-root `user`, RuntimeDefault seccomp."""
    return k8s.core.v1.PodSecurityContextArgs(
        run_as_non_root=True,
        run_as_user=user,
        run_as_group=user,
        fs_group=user,
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


def push_job_network_policies(
    resource_name: str,
    namespace: pulumi.Input[str],
    policy_name: str,
    selector: Mapping[str, str],
    identity_egress: Sequence[Mapping[str, Any]],
    opts: pulumi.ResourceOptions,
) -> None:
    """Default-deny for a job's namespace, then egress to DNS, the cloud's identity endpoint, HTTPS
    and the Pushgateway only: the shape every job that pushes metrics runs under (drift, budget)."""
    k8s.networking.v1.NetworkPolicy(
        f"{resource_name}-default-deny",
        metadata=k8s.meta.v1.ObjectMetaArgs(name="default-deny", namespace=namespace),
        spec=k8s.networking.v1.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(), policy_types=["Ingress", "Egress"]
        ),
        opts=opts,
    )
    pushgateway = k8s.networking.v1.NetworkPolicyEgressRuleArgs(
        to=[
            k8s.networking.v1.NetworkPolicyPeerArgs(
                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                    match_labels={"kubernetes.io/metadata.name": MONITORING_NAMESPACE}
                )
            )
        ],
        ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=PUSHGATEWAY_PORT, protocol="TCP")],
    )
    k8s.networking.v1.NetworkPolicy(
        f"{resource_name}-netpol",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=policy_name, namespace=namespace),
        spec=k8s.networking.v1.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
            policy_types=["Egress"],
            egress=[dns_egress(), *identity_and_https_egress(identity_egress), pushgateway],
        ),
        opts=opts,
    )


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
        ref = SERVICE_ACCOUNTS["monitor"]
        namespace = k8s.core.v1.Namespace(
            f"{name}-drift-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=ref.namespace, labels={**RESTRICTED, **labels}),
            opts=pulumi.ResourceOptions(parent=self),
        )
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[namespace, *args.after])
        sa = k8s.core.v1.ServiceAccount(
            f"{name}-monitor-sa",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=ref.name, namespace=ref.namespace, labels=labels, annotations=dict(args.sa_annotations)
            ),
            automount_service_account_token=False,
            opts=in_ns,
        )
        selector = {"app.kubernetes.io/name": "drift"}
        env = {"MONITORING_PUSHGATEWAY_URL": PUSHGATEWAY_URL, **args.storage_env}
        self.cron_job = k8s.batch.v1.CronJob(
            f"{name}-drift",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="drift", namespace=ref.namespace, labels=labels),
            spec=k8s.batch.v1.CronJobSpecArgs(
                schedule=args.schedule,
                time_zone="Etc/UTC",
                # A late run replaces nothing: the next one reads the newer window anyway.
                concurrency_policy="Forbid",
                starting_deadline_seconds=3600,
                successful_jobs_history_limit=3,
                failed_jobs_history_limit=3,
                job_template=k8s.batch.v1.JobTemplateSpecArgs(
                    spec=k8s.batch.v1.JobSpecArgs(
                        backoff_limit=2,
                        active_deadline_seconds=DRIFT_DEADLINE_S,
                        ttl_seconds_after_finished=86_400,
                        template=k8s.core.v1.PodTemplateSpecArgs(
                            metadata=k8s.meta.v1.ObjectMetaArgs(
                                labels={**labels, **selector, **args.pod_labels}
                            ),
                            spec=k8s.core.v1.PodSpecArgs(
                                service_account_name=ref.name,
                                # The cloud identity needs the projected token (not the API token).
                                automount_service_account_token=False,
                                restart_policy="Never",
                                security_context=pod_security(1000),
                                node_selector=dict(POOL_SELECTORS["system"].node_selector),
                                containers=[
                                    k8s.core.v1.ContainerArgs(
                                        name="drift",
                                        image=args.image,
                                        command=["python", "-m", "monitoring", "drift"],
                                        args=[
                                            "--reference",
                                            pulumi.Output.concat(args.reference_url, "/"),
                                            "--current",
                                            pulumi.Output.concat(args.current_url, "/"),
                                            "--out",
                                            pulumi.Output.concat(args.out_url, "/"),
                                        ],  # fmt: skip
                                        env=[k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in env.items()],
                                        resources=k8s.core.v1.ResourceRequirementsArgs(
                                            requests=dict(DRIFT_RESOURCES), limits=dict(DRIFT_RESOURCES)
                                        ),
                                        security_context=hardened(),
                                        volume_mounts=[
                                            k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp")
                                        ],
                                    )
                                ],
                                volumes=[
                                    k8s.core.v1.VolumeArgs(
                                        name="tmp",
                                        empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="2Gi"),
                                    )
                                ],
                            ),
                        ),
                    )
                ),
            ),
            opts=pulumi.ResourceOptions.merge(in_ns, pulumi.ResourceOptions(depends_on=[sa])),
        )
        # The job: DNS, its cloud identity endpoint, HTTPS to the buckets, and the Pushgateway.
        push_job_network_policies(
            f"{name}-drift", ref.namespace, "drift", selector, args.identity_egress, in_ns
        )
