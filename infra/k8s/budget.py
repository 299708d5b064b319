"""The budget cost job on the cluster (issue 13): a CronJob that runs `python -m monitoring budget` in the
training image and pushes `ml_budget_limit_eur` / `ml_budget_forecast_eur{stack}` to the in-cluster
Pushgateway, which the BudgetForecastOverLimit alert (monitoring/rules/cost.yaml) reads.

Declared on every stack, with the identity its cloud hands over in a `BudgetJob` (AWS: an IAM role allowed
`budgets:ViewBudget` on the stack's budget only, bound by EKS Pod Identity; Azure: a managed identity with
Cost Management Reader on the budget's resource group, federated with the job's service account; GCP: a
Google service account, by GKE Workload Identity, that may only consume the pull subscription of the
budget's Pub/Sub notifications, infra/gcp/budget.py: GCP's Budgets API returns no spend).

The same hardened shape as the drift CronJob (infra/k8s/push_job.py); its HTTPS egress reaches the budget
API and the token exchange.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.config import PlatformConfig
from infra.k8s import push_job
from infra.shape import BUDGET_SERVICE_ACCOUNT, BudgetJob, budget_name

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
    name = f"{cfg.name}-budget"
    return push_job.declare(
        push_job.PushJob(
            name=JOB_NAME,
            args=cli_args(cfg, job),
            image=image,
            schedule=SCHEDULE,
            deadline_s=DEADLINE_S,
            resources=RESOURCES,
            scratch="64Mi",
            service_account=BUDGET_SERVICE_ACCOUNT,
            sa_annotations=job.sa_annotations,
            pod_labels=job.pod_labels,
            identity_egress=identity_egress,
        ),
        push_job.ResourceNames(namespace=f"{name}-ns", service_account=f"{name}-sa", cron_job=name),
        {"app.kubernetes.io/part-of": "eu-ml-platform", **labels},
        opts,
        after,
    )
