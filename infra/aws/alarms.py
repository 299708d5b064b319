"""The cloud's own alarm for the serving platform (issue 13, item 6): one CloudWatch alarm on the EKS
control plane's 5xx answers, the endpoint every client, controller and autoscaler goes through.

Cost: EKS publishes these control-plane metrics to CloudWatch at no charge (Kubernetes 1.28+, namespace
AWS/EKS), and one standard-resolution alarm is inside CloudWatch's free tier (10 alarm metrics a month).
Triton's own endpoint has no load balancer (ClusterIP), so the cloud cannot see it: its health is in
Prometheus and Alertmanager. The alarm has no notification action yet (an SNS topic encrypted with the
environment key needs a key-policy grant for CloudWatch): it shows in the CloudWatch console.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.config import PlatformConfig
from infra.naming import tags

# Three 5-minute periods with any 5xx: a control plane in trouble, not a single retried request.
PERIOD_S, PERIODS = 300, 3


def api_error_alarm(
    cfg: PlatformConfig, cluster_name: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> aws.cloudwatch.MetricAlarm:
    return aws.cloudwatch.MetricAlarm(
        f"{cfg.name}-eks-api-5xx",
        name=f"{cfg.name}-eks-api-5xx",
        alarm_description=f"{cfg.name}: the EKS API server answers 5xx (infra/README.md, Monitoring)",
        namespace="AWS/EKS",
        metric_name="apiserver_request_total_5XX",
        dimensions={"ClusterName": cluster_name},
        statistic="Sum",
        period=PERIOD_S,
        evaluation_periods=PERIODS,
        comparison_operator="GreaterThanThreshold",
        threshold=0,
        treat_missing_data="notBreaching",
        tags=tags(cfg),
        opts=opts,
    )
