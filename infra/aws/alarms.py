"""The cloud's own alarm for the serving platform (issue 13, item 6): one CloudWatch alarm on the EKS
control plane's 5xx answers, the endpoint every client, controller and autoscaler goes through.

Cost: EKS publishes these control-plane metrics to CloudWatch at no charge (Kubernetes 1.28+, namespace
AWS/EKS), and one standard-resolution alarm is inside CloudWatch's free tier (10 alarm metrics a month).
Triton's own endpoint has no load balancer (ClusterIP), so the cloud cannot see it: its health is in
Prometheus and Alertmanager. The alarm mails the alert addresses through an SNS topic encrypted with the
environment key (whose policy lets CloudWatch use it for this account); SNS e-mail is free up to 1,000
notifications a month. Each address confirms its subscription once (AWS sends the link).
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.config import PlatformConfig
from infra.naming import tags

# Three 5-minute periods with any 5xx: a control plane in trouble, not a single retried request.
PERIOD_S, PERIODS = 300, 3


def api_error_alarm(
    cfg: PlatformConfig,
    cluster_name: pulumi.Input[str],
    key_arn: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
) -> aws.cloudwatch.MetricAlarm:
    topic = aws.sns.Topic(
        f"{cfg.name}-alerts",
        name=f"{cfg.name}-alerts",
        kms_master_key_id=key_arn,
        tags=tags(cfg),
        opts=opts,
    )
    for i, email in enumerate(cfg.alert_emails):
        aws.sns.TopicSubscription(
            f"{cfg.name}-alerts-email-{i}", topic=topic.arn, protocol="email", endpoint=email, opts=opts
        )
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
        alarm_actions=[topic.arn],
        ok_actions=[topic.arn],
        tags=tags(cfg),
        opts=opts,
    )
