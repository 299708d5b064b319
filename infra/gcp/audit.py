"""Data-access audit logs for Cloud Storage kept >= 365 days in a regional log bucket, and the budget
(e-mails at its thresholds; its status to the Pub/Sub topic the budget job reads, infra/gcp/budget.py)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig
from infra.gcp.budget import BudgetNotifications
from infra.gcp.keys import EnvironmentKey
from infra.naming import tags
from infra.shape import budget_name

# Cloud Audit Logs (admin activity and the data access enabled below) of this project.
AUDIT_FILTER = 'logName:"cloudaudit.googleapis.com"'


class Audit(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        project: str,
        project_number: str,
        key: EnvironmentKey,
        billing_provider: pulumi.ProviderResource,
        notifications: BudgetNotifications,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:gcp:Audit", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        gcp.projects.IAMAuditConfig(
            f"{name}-storage-data-access",
            project=project,
            service="storage.googleapis.com",
            audit_log_configs=[
                gcp.projects.IAMAuditConfigAuditLogConfigArgs(log_type=t)
                for t in ("ADMIN_READ", "DATA_READ", "DATA_WRITE")
            ],
            opts=child,
        )
        # The `_Default` bucket keeps 30 days; audit logs get their own regional bucket with our retention.
        log_bucket = gcp.logging.ProjectBucketConfig(
            f"{name}-log-bucket",
            project=project,
            location=cfg.region,
            bucket_id=f"{cfg.name}-audit",
            retention_days=cfg.audit_retention_days,
            locked=cfg.is_prod,
            cmek_settings=gcp.logging.ProjectBucketConfigCmekSettingsArgs(kms_key_name=key.key_name),
            # `locked` alone does not stop Pulumi from trying a delete: infra/lifecycle.py protects it in prod.
            opts=pulumi.ResourceOptions(parent=self, depends_on=key.grants),
        )
        gcp.logging.ProjectSink(
            f"{name}-sink",
            name=f"{cfg.name}-audit",
            project=project,
            destination=pulumi.Output.concat("logging.googleapis.com/", log_bucket.id),
            filter=AUDIT_FILTER,
            unique_writer_identity=True,
            opts=child,
        )
        channels = [
            gcp.monitoring.NotificationChannel(
                f"{name}-budget-email-{i}",
                project=project,
                display_name=f"{cfg.name} budget {email}",
                type="email",
                labels={"email_address": email},
                user_labels=tags(cfg),
                opts=child,
            )
            for i, email in enumerate(cfg.budget.alert_emails)
        ]
        assert cfg.gcp_billing_account is not None
        gcp.billing.Budget(
            f"{name}-budget",
            billing_account=cfg.gcp_billing_account,
            # The name `monitoring budget --budget` matches in the notifications (budgetDisplayName).
            display_name=budget_name(cfg.name),
            budget_filter=gcp.billing.BudgetBudgetFilterArgs(
                projects=[f"projects/{project_number}"], calendar_period="MONTH"
            ),
            amount=gcp.billing.BudgetAmountArgs(
                specified_amount=gcp.billing.BudgetAmountSpecifiedAmountArgs(
                    currency_code=cfg.budget.currency, units=str(int(cfg.budget.monthly_amount))
                )
            ),
            threshold_rules=[
                gcp.billing.BudgetThresholdRuleArgs(threshold_percent=t / 100, spend_basis="CURRENT_SPEND")
                for t in cfg.budget.alert_thresholds
            ]
            + [gcp.billing.BudgetThresholdRuleArgs(threshold_percent=1.0, spend_basis="FORECASTED_SPEND")],
            all_updates_rule=gcp.billing.BudgetAllUpdatesRuleArgs(
                monitoring_notification_channels=[c.id for c in channels],
                disable_default_iam_recipients=False,
                # Every status update (not only crossed thresholds) to the budget job's topic; "1.0" is the
                # only schema (budgets-programmatic-notifications#notification_format).
                pubsub_topic=notifications.topic_path,
                schema_version="1.0",
            ),
            opts=pulumi.ResourceOptions(
                parent=self, provider=billing_provider, depends_on=[notifications.topic]
            ),
        )
        self.register_outputs({})
