"""CloudTrail (multi-region, validated, KMS-encrypted, into the log bucket) and the monthly budget."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.config import PlatformConfig
from infra.naming import tags


def trail_name(cfg: PlatformConfig) -> str:
    return f"{cfg.name}-audit"


def trail_arn(cfg: PlatformConfig, account_id: str) -> str:
    """Known before creation, so the key and bucket policies can name the trail (confused-deputy guard)."""
    return f"arn:aws:cloudtrail:{cfg.region}:{account_id}:trail/{trail_name(cfg)}"


class Audit(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        log_bucket: pulumi.Input[str],
        data_bucket_names: list[str],
        key_arn: pulumi.Input[str],
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:aws:Audit", name, None, opts)
        self.trail = aws.cloudtrail.Trail(
            f"{name}-trail",
            name=trail_name(cfg),
            s3_bucket_name=log_bucket,
            s3_key_prefix="cloudtrail",
            is_multi_region_trail=True,
            include_global_service_events=True,
            enable_log_file_validation=True,
            kms_key_id=key_arn,
            # Management events plus object-level reads and writes on the data buckets.
            event_selectors=[
                aws.cloudtrail.TrailEventSelectorArgs(
                    read_write_type="All",
                    include_management_events=True,
                    data_resources=[
                        aws.cloudtrail.TrailEventSelectorDataResourceArgs(
                            type="AWS::S3::Object", values=[f"arn:aws:s3:::{b}/" for b in data_bucket_names]
                        )
                    ],
                )
            ],
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )
        notifications = [
            aws.budgets.BudgetNotificationArgs(
                comparison_operator="GREATER_THAN",
                notification_type="ACTUAL",
                threshold=float(threshold),
                threshold_type="PERCENTAGE",
                subscriber_email_addresses=list(cfg.budget.alert_emails),
            )
            for threshold in cfg.budget.alert_thresholds
        ]
        # A forecast alert at 100% warns before the money is spent.
        notifications.append(
            aws.budgets.BudgetNotificationArgs(
                comparison_operator="GREATER_THAN",
                notification_type="FORECASTED",
                threshold=100.0,
                threshold_type="PERCENTAGE",
                subscriber_email_addresses=list(cfg.budget.alert_emails),
            )
        )
        self.budget = aws.budgets.Budget(
            f"{name}-budget",
            name=f"{cfg.name}-monthly",
            budget_type="COST",
            time_unit="MONTHLY",
            limit_amount=f"{cfg.budget.monthly_amount:.2f}",
            limit_unit=cfg.budget.currency,
            # Cost-allocation tag `stack` (activate it once in the Billing console).
            cost_filters=[
                aws.budgets.BudgetCostFilterArgs(name="TagKeyValue", values=[f"user:stack${cfg.stack}"])
            ],
            notifications=notifications,
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"trail": self.trail.arn})
