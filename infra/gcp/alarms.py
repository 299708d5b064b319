"""The cloud's own alarm for the serving platform (issue 13, item 6): a Cloud Monitoring alert policy on
Triton's container restarts, mailed to the alert addresses.

Cost: `kubernetes.io/container/restart_count` is a GKE system metric (free); email notification channels
are free. One alert condition is the smallest alerting footprint Cloud Monitoring bills
(cloud.google.com/stackdriver/pricing, "Alerting"). Latency, errors and drift are Prometheus's.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig
from infra.naming import tags
from infra.shape import SERVICE_ACCOUNTS

RESTARTS, WINDOW = 3, "600s"


def restart_filter(cluster: str) -> str:
    namespace = SERVICE_ACCOUNTS["server"].namespace
    return (
        'resource.type = "k8s_container" AND metric.type = "kubernetes.io/container/restart_count" AND '
        f'resource.labels.cluster_name = "{cluster}" AND resource.labels.namespace_name = "{namespace}"'
    )


def serving_restart_policy(
    cfg: PlatformConfig, project: str, cluster: str, opts: pulumi.ResourceOptions
) -> gcp.monitoring.AlertPolicy:
    channels = [
        gcp.monitoring.NotificationChannel(
            f"{cfg.name}-alerts-email-{i}",
            project=project,
            display_name=f"{cfg.name} alerts {email}",
            type="email",
            labels={"email_address": email},
            user_labels=tags(cfg),
            opts=opts,
        )
        for i, email in enumerate(cfg.alert_emails)
    ]
    return gcp.monitoring.AlertPolicy(
        f"{cfg.name}-serving-restarts",
        project=project,
        display_name=f"{cfg.name}: Triton containers restart",
        combiner="OR",
        conditions=[
            gcp.monitoring.AlertPolicyConditionArgs(
                display_name=f"more than {RESTARTS} restarts in {WINDOW}",
                condition_threshold=gcp.monitoring.AlertPolicyConditionConditionThresholdArgs(
                    filter=restart_filter(cluster),
                    comparison="COMPARISON_GT",
                    threshold_value=RESTARTS,
                    duration="0s",
                    aggregations=[
                        gcp.monitoring.AlertPolicyConditionConditionThresholdAggregationArgs(
                            alignment_period=WINDOW,
                            per_series_aligner="ALIGN_DELTA",
                            cross_series_reducer="REDUCE_SUM",
                        )
                    ],
                ),
            )
        ],
        notification_channels=[c.id for c in channels],
        user_labels=tags(cfg),
        opts=opts,
    )
