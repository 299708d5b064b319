"""A scheduled `python -m monitoring <command>` that pushes metrics (issue 13): the drift job
(infra/k8s/monitoring_stack.py) and the budget job (infra/k8s/budget.py) run under this one shape.

Its own restricted namespace and service account (the cloud identity's annotations, no API token), a
CronJob on the system pool (non-root, read-only root filesystem with a scratch `/tmp`, no privilege
escalation, all capabilities dropped, RuntimeDefault seccomp, requests = limits) and a default-deny
namespace whose one egress policy opens DNS, the cloud's identity endpoint, HTTPS and the Pushgateway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.k8s.monitoring import MONITORING_NAMESPACE, PUSHGATEWAY_PORT, PUSHGATEWAY_URL
from infra.k8s.netpol import default_deny, dns_egress, identity_and_https_egress
from infra.k8s.serving import RESTRICTED
from infra.shape import POOL_SELECTORS, ServiceAccountRef

# The jobs run `python -m monitoring` in the training image: its USER (containers/training/Dockerfile).
JOB_USER = 10001
# A day of finished Jobs to read logs from; three of each outcome in the history.
TTL_AFTER_FINISHED_S = 86_400
HISTORY = 3


def hardened() -> k8s.core.v1.SecurityContextArgs:
    """The container security context of every job of ours: Pod Security "restricted"."""
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


def _network_policies(
    resource_name: str,
    namespace: pulumi.Input[str],
    policy_name: str,
    selector: Mapping[str, str],
    identity_egress: Sequence[Mapping[str, Any]],
    opts: pulumi.ResourceOptions,
) -> None:
    """Default-deny for a job's namespace, then egress to DNS, the cloud's identity endpoint, HTTPS
    and the Pushgateway only."""
    default_deny(resource_name, namespace, opts)
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


@dataclass(frozen=True, slots=True)
class PushJob:
    """What differs between the jobs; the rest of the shape is declare()'s."""

    name: str
    """The `python -m monitoring` subcommand, also the CronJob, its container, its pods'
    `app.kubernetes.io/name` and its egress policy."""
    args: Sequence[pulumi.Input[str]]
    image: pulumi.Input[str]
    schedule: str
    deadline_s: int
    """How late a run may start and how long it may run."""
    resources: Mapping[str, str]
    scratch: str
    """Size limit of the `/tmp` emptyDir (Python and the SDKs write there; the root stays read-only)."""
    service_account: ServiceAccountRef
    env: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    sa_annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    identity_egress: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True, slots=True)
class ResourceNames:
    """Pulumi resource names: kept as each job first declared them, since a rename replaces the object."""

    namespace: str
    service_account: str
    cron_job: str
    """Also the prefix of the NetworkPolicies' names."""


def declare(
    job: PushJob,
    names: ResourceNames,
    labels: Mapping[str, str],
    opts: pulumi.ResourceOptions,
    after: Sequence[pulumi.Resource] = (),
) -> k8s.batch.v1.CronJob:
    """The namespace, service account, CronJob and NetworkPolicies of `job`; `after` (the Pushgateway
    add-on) exists before the first run pushes."""
    ref = job.service_account
    namespace = k8s.core.v1.Namespace(
        names.namespace,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=ref.namespace, labels={**RESTRICTED, **labels}),
        opts=opts,
    )
    in_ns = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace, *after]))
    sa = k8s.core.v1.ServiceAccount(
        names.service_account,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=ref.name, namespace=ref.namespace, labels=dict(labels), annotations=dict(job.sa_annotations)
        ),
        automount_service_account_token=False,
        opts=in_ns,
    )
    selector = {"app.kubernetes.io/name": job.name}
    cron_job = k8s.batch.v1.CronJob(
        names.cron_job,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=job.name, namespace=ref.namespace, labels=dict(labels)),
        spec=k8s.batch.v1.CronJobSpecArgs(
            schedule=job.schedule,
            time_zone="Etc/UTC",
            # Each run reads its whole input anew (the budget, the newest window): a late run is
            # skipped, never stacked on the next one.
            concurrency_policy="Forbid",
            starting_deadline_seconds=job.deadline_s,
            successful_jobs_history_limit=HISTORY,
            failed_jobs_history_limit=HISTORY,
            job_template=k8s.batch.v1.JobTemplateSpecArgs(
                spec=k8s.batch.v1.JobSpecArgs(
                    backoff_limit=2,
                    active_deadline_seconds=job.deadline_s,
                    ttl_seconds_after_finished=TTL_AFTER_FINISHED_S,
                    template=k8s.core.v1.PodTemplateSpecArgs(
                        metadata=k8s.meta.v1.ObjectMetaArgs(labels={**labels, **selector, **job.pod_labels}),
                        spec=_pod(job),
                    ),
                )
            ),
        ),
        opts=pulumi.ResourceOptions.merge(in_ns, pulumi.ResourceOptions(depends_on=[sa])),
    )
    _network_policies(names.cron_job, ref.namespace, job.name, selector, job.identity_egress, in_ns)
    return cron_job


def _pod(job: PushJob) -> k8s.core.v1.PodSpecArgs:
    env = {"MONITORING_PUSHGATEWAY_URL": PUSHGATEWAY_URL, **job.env}
    return k8s.core.v1.PodSpecArgs(
        service_account_name=job.service_account.name,
        # The cloud identity needs the projected token (not the API token).
        automount_service_account_token=False,
        restart_policy="Never",
        security_context=pod_security(JOB_USER),
        node_selector=dict(POOL_SELECTORS["system"].node_selector),
        containers=[
            k8s.core.v1.ContainerArgs(
                name=job.name,
                image=job.image,
                command=["python", "-m", "monitoring", job.name],
                args=list(job.args),
                env=[k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in env.items()],
                resources=k8s.core.v1.ResourceRequirementsArgs(
                    requests=dict(job.resources), limits=dict(job.resources)
                ),
                security_context=hardened(),
                volume_mounts=[k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp")],
            )
        ],
        volumes=[
            k8s.core.v1.VolumeArgs(
                name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=job.scratch)
            )
        ],
    )
