"""The budget cost job on the cluster (issue 13): a CronJob that runs `python -m monitoring budget` in the
training image and pushes `ml_budget_limit_eur` / `ml_budget_forecast_eur{stack}` to the in-cluster
Pushgateway, which the BudgetForecastOverLimit alert (monitoring/rules/cost.yaml) reads.

Declared on every stack, with the identity its cloud hands over in a `BudgetJob` (AWS: an IAM role allowed
`budgets:ViewBudget` on the stack's budget only, bound by EKS Pod Identity; Azure: a managed identity with
Cost Management Reader on the budget's resource group, federated with the job's service account; GCP: a
Google service account, by GKE Workload Identity, that may only consume the pull subscription of the
budget's Pub/Sub notifications, infra/gcp/budget.py: GCP's Budgets API returns no spend).

Hardened like the drift CronJob (infra/k8s/monitoring_stack.py): non-root, read-only root filesystem,
no privilege escalation, all capabilities dropped, RuntimeDefault seccomp, requests = limits, a
default-deny namespace whose one egress policy opens DNS, the cloud's identity endpoint, HTTPS to public
addresses (the budget API and the token exchange) and the Pushgateway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.config import PlatformConfig
from infra.k8s.monitoring import PUSHGATEWAY_URL
from infra.k8s.monitoring_stack import hardened, pod_security, push_job_network_policies
from infra.k8s.serving import RESTRICTED
from infra.shape import BUDGET_SERVICE_ACCOUNT, POOL_SELECTORS, BudgetJob, budget_name

JOB_NAME = "budget"
# Hourly, off the hour. AWS "updates your budget status several times a day" (Budgets API reference,
# botocore's budgets service model); Cloud Billing publishes a budget's status to its topic several times
# a day (cloud.google.com/billing/docs/how-to/budgets-programmatic-notifications); Azure's cost data reaches Cost Management several times a day,
# typically 8-24 hours after use (learn.microsoft.com/azure/cost-management-billing/costs/
# understand-cost-mgt-data). An hourly read sees each refresh within the hour for one API read; the
# gauges stay in the Pushgateway between runs, so the alert's `for: 1h` is not broken by the gaps.
SCHEDULE = "17 * * * *"
# One API read and a push: small, and bounded well under the schedule's period.
RESOURCES = {"cpu": "250m", "memory": "256Mi"}
DEADLINE_S = 600


def cli_args(cfg: PlatformConfig, job: BudgetJob) -> list[pulumi.Input[str]]:
    """Arguments of `python -m monitoring budget` (monitoring/cli.py) for this stack's budget."""
    args: list[pulumi.Input[str]] = [*job.cli_args, "--budget", budget_name(cfg.name), "--stack", cfg.stack]
    if cfg.budget.currency != "EUR":
        # The gauges are in EUR; budget.eurPerUnit (or its default, infra/config/model.py) converts. The
        # alert compares forecast and limit converted alike: the rate only scales the figures shown.
        rate = cfg.budget.eur_rate
        if rate is None:  # infra.config.parse refuses this; a hand-built config may not have been parsed
            raise ValueError(f"budget.currency {cfg.budget.currency}: set budget.eurPerUnit (EUR per 1 unit)")
        args += ["--eur-per-unit", f"{rate:g}"]
    return args


def declare(
    cfg: PlatformConfig,
    job: BudgetJob | None,
    image: pulumi.Input[str],
    labels: Mapping[str, str],
    opts: pulumi.ResourceOptions,
    *,
    identity_egress: Sequence[Mapping[str, Any]] = (),
    after: Sequence[pulumi.Resource] = (),
) -> k8s.batch.v1.CronJob | None:
    """The CronJob, its namespace, service account and NetworkPolicies; nothing where `job` is None."""
    if job is None:
        return None
    name, ref = f"{cfg.name}-budget", BUDGET_SERVICE_ACCOUNT
    labels = {"app.kubernetes.io/part-of": "eu-ml-platform", **labels}
    namespace = k8s.core.v1.Namespace(
        f"{name}-ns",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=ref.namespace, labels={**RESTRICTED, **labels}),
        opts=opts,
    )
    # The Pushgateway (an add-on) exists before the first run pushes.
    in_ns = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace, *after]))
    sa = k8s.core.v1.ServiceAccount(
        f"{name}-sa",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=ref.name, namespace=ref.namespace, labels=labels, annotations=dict(job.sa_annotations)
        ),
        automount_service_account_token=False,
        opts=in_ns,
    )
    selector = {"app.kubernetes.io/name": JOB_NAME}
    cron_job = k8s.batch.v1.CronJob(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=JOB_NAME, namespace=ref.namespace, labels=labels),
        spec=k8s.batch.v1.CronJobSpecArgs(
            schedule=SCHEDULE,
            time_zone="Etc/UTC",
            # A late run is replaced by the next one: the budget is read whole each time.
            concurrency_policy="Forbid",
            starting_deadline_seconds=DEADLINE_S,
            successful_jobs_history_limit=3,
            failed_jobs_history_limit=3,
            job_template=k8s.batch.v1.JobTemplateSpecArgs(
                spec=k8s.batch.v1.JobSpecArgs(
                    backoff_limit=2,
                    active_deadline_seconds=DEADLINE_S,
                    ttl_seconds_after_finished=86_400,
                    template=k8s.core.v1.PodTemplateSpecArgs(
                        metadata=k8s.meta.v1.ObjectMetaArgs(labels={**labels, **selector, **job.pod_labels}),
                        spec=k8s.core.v1.PodSpecArgs(
                            service_account_name=ref.name,
                            # The cloud identity needs the projected token (not the API token).
                            automount_service_account_token=False,
                            restart_policy="Never",
                            security_context=pod_security(1000),
                            node_selector=dict(POOL_SELECTORS["system"].node_selector),
                            containers=[
                                k8s.core.v1.ContainerArgs(
                                    name=JOB_NAME,
                                    image=image,
                                    command=["python", "-m", "monitoring", "budget"],
                                    args=cli_args(cfg, job),
                                    env=[
                                        k8s.core.v1.EnvVarArgs(
                                            name="MONITORING_PUSHGATEWAY_URL", value=PUSHGATEWAY_URL
                                        )
                                    ],
                                    resources=k8s.core.v1.ResourceRequirementsArgs(
                                        requests=dict(RESOURCES), limits=dict(RESOURCES)
                                    ),
                                    security_context=hardened(),
                                    # Python and the SDKs may want a scratch directory; the root stays read-only.
                                    volume_mounts=[
                                        k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp")
                                    ],
                                )
                            ],
                            volumes=[
                                k8s.core.v1.VolumeArgs(
                                    name="tmp",
                                    empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="64Mi"),
                                )
                            ],
                        ),
                    ),
                )
            ),
        ),
        opts=pulumi.ResourceOptions.merge(in_ns, pulumi.ResourceOptions(depends_on=[sa])),
    )
    # DNS, the cloud's identity endpoint, HTTPS to the budget API / token exchange, and the Pushgateway.
    push_job_network_policies(name, ref.namespace, JOB_NAME, selector, identity_egress, in_ns)
    return cron_job
