"""The cloud's own alarm for the serving platform (issue 13, item 6): an Azure Monitor metric alert on the
AKS cluster's Triton pods that are not Ready, mailed to the alert addresses through an action group.

Signal: `kube_pod_status_ready` is an AKS platform metric (Microsoft.ContainerService/managedClusters,
dimensions namespace, pod, condition), collected at no charge; the rule watches the serving namespace's
pods whose Ready condition is false, the Azure twin of GCP's restart policy and AWS's API alarm. Cost: a
metric alert rule is billed per monitored time series (one here: learn.microsoft.com/azure/azure-monitor/
cost-usage, "Alerts"); email from an action group is free up to 1,000 mails a month. Latency, errors and
drift are Prometheus's.

Residency: the action group is *regional* (Microsoft: "The action group is stored within the selected
region ... Use this option if you want to ensure that the processing of your action group is performed
within a specific geographic boundary"; learn.microsoft.com/azure/azure-monitor/alerts/action-groups,
"Global and regional action group processing"), in an EU region that offers regional processing. The
metric alert rule itself only exists in the `global` location; it holds its configuration (scope,
criteria, action group id), no data: that is a reviewed waiver in policies/waivers.yaml.
"""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure

from infra.config import PlatformConfig
from infra.naming import tags
from infra.shape import SERVICE_ACCOUNTS

# EU regions Microsoft offers for regional action group processing (action-groups doc, list above).
ACTION_GROUP_REGIONS = ("swedencentral", "germanywestcentral")
METRIC_NAMESPACE = "Microsoft.ContainerService/managedClusters"
METRIC = "kube_pod_status_ready"
# Any Triton pod not Ready, on average over 15 minutes, checked every 5: a rollout's short gap is no page.
WINDOW, FREQUENCY = "PT15M", "PT5M"
# Azure Monitor severities run 0 (critical) .. 4 (verbose); 2 = warning, as the other clouds' e-mail alarms.
SEVERITY = 2


def action_group_region(region: str) -> str:
    """The stack's own region when it offers regional processing, else the first EU region that does."""
    return region if region in ACTION_GROUP_REGIONS else ACTION_GROUP_REGIONS[0]


def short_name(name: str) -> str:
    """Action group short names are at most 12 characters (they head SMS and e-mail subjects)."""
    return name.removeprefix("mlp-")[:12]


def serving_not_ready_alert(
    cfg: PlatformConfig,
    *,
    resource_group: str,
    cluster_id: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
) -> azure.monitor.MetricAlert:
    group = azure.monitor.ActionGroup(
        f"{cfg.name}-alerts",
        action_group_name=f"{cfg.name}-alerts",
        resource_group_name=resource_group,
        location=action_group_region(cfg.region),
        group_short_name=short_name(cfg.name),
        enabled=True,
        email_receivers=[
            azure.monitor.MicrosoftCommonEmailReceiverArgs(
                name=f"email-{i}", email_address=email, use_common_alert_schema=True
            )
            for i, email in enumerate(cfg.alert_emails)
        ],
        tags=tags(cfg),
        opts=opts,
    )
    namespace = SERVICE_ACCOUNTS["server"].namespace
    return azure.monitor.MetricAlert(
        f"{cfg.name}-serving-not-ready",
        rule_name=f"{cfg.name}-serving-not-ready",
        resource_group_name=resource_group,
        location="global",  # the only location of metric alert rules (see the module docstring)
        description=f"{cfg.name}: Triton pods in namespace {namespace} are not Ready (infra/README.md, Monitoring)",
        severity=SEVERITY,
        enabled=True,
        scopes=[cluster_id],
        evaluation_frequency=FREQUENCY,
        window_size=WINDOW,
        auto_mitigate=True,
        criteria=azure.monitor.MetricAlertSingleResourceMultipleMetricCriteriaArgs(
            odata_type="Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria",
            all_of=[
                azure.monitor.MetricCriteriaArgs(
                    criterion_type="StaticThresholdCriterion",
                    name="serving-pods-not-ready",
                    metric_namespace=METRIC_NAMESPACE,
                    metric_name=METRIC,
                    dimensions=[
                        azure.monitor.MetricDimensionArgs(
                            name="namespace", operator="Include", values=[namespace]
                        ),
                        azure.monitor.MetricDimensionArgs(
                            name="condition", operator="Include", values=["false"]
                        ),
                    ],
                    time_aggregation="Average",
                    operator="GreaterThan",
                    threshold=0,
                )
            ],
        ),
        actions=[azure.monitor.MetricAlertActionArgs(action_group_id=group.id)],
        tags=tags(cfg),
        opts=opts,
    )
