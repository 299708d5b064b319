"""Log Analytics (>= 365 days), diagnostic settings for AKS audit, storage data access, Key Vault and the
registry, and the resource group's consumption budget."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_azure_native as azure

from infra.config import PlatformConfig
from infra.naming import tags

# The subscription's Activity Log (who changed what, in the control plane) to the same workspace.
ACTIVITY_LOG_CATEGORIES = (
    *("Administrative", "Security", "ServiceHealth", "Alert"),
    *("Recommendation", "Policy", "Autoscale", "ResourceHealth"),
)


def budget_start(today: datetime.date) -> str:
    """Azure budgets start on the first day of a month, not in the past month (Consumption Budgets API)."""
    return f"{today.replace(day=1).isoformat()}T00:00:00Z"


# Log categories per resource kind (Azure Monitor resource log categories).
CATEGORIES: Mapping[str, Sequence[str]] = {
    "aks": ("kube-audit", "kube-audit-admin", "guard"),
    "blob": ("StorageRead", "StorageWrite", "StorageDelete"),
    "vault": ("AuditEvent",),
    "registry": ("ContainerRegistryRepositoryEvents", "ContainerRegistryLoginEvents"),
}


class AuditWorkspace(pulumi.ComponentResource):
    workspace: azure.operationalinsights.Workspace

    def __init__(
        self, name: str, cfg: PlatformConfig, *, resource_group: str, opts: pulumi.ResourceOptions
    ) -> None:
        super().__init__("eu-ml-platform:azure:AuditWorkspace", name, None, opts)
        self.workspace = azure.operationalinsights.Workspace(
            f"{name}-workspace",
            workspace_name=f"log-{cfg.name}",
            resource_group_name=resource_group,
            location=cfg.region,
            sku=azure.operationalinsights.WorkspaceSkuArgs(name="PerGB2018"),
            retention_in_days=cfg.audit_retention_days,
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"workspace": self.workspace.id})


class Audit(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        resource_group: str,
        subscription: str,
        workspace_id: pulumi.Input[str],
        log_account_id: pulumi.Input[str],
        targets: Mapping[str, tuple[str, pulumi.Input[str]]],
        today: datetime.date,
        opts: pulumi.ResourceOptions,
    ) -> None:
        """`targets`: setting name -> (CATEGORIES key, resource id)."""
        super().__init__("eu-ml-platform:azure:Audit", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        for setting, (kind, resource_id) in targets.items():
            azure.monitor.DiagnosticSetting(
                f"{name}-{setting}",
                name="audit",
                resource_uri=resource_id,
                workspace_id=workspace_id,
                # Blob access logs also land in the log account (the "access logs bucket").
                storage_account_id=log_account_id if kind == "blob" else None,
                logs=[
                    azure.monitor.DiagnosticsLogSettingsArgs(category=c, enabled=True)
                    for c in CATEGORIES[kind]
                ],
                opts=child,
            )
        # At most five diagnostic settings per subscription: one per stack sharing it.
        azure.monitor.SubscriptionDiagnosticSetting(
            f"{name}-activity-log",
            name=f"{cfg.name}-activity-log",
            workspace_id=workspace_id,
            logs=[
                azure.monitor.SubscriptionLogSettingsArgs(category=c, enabled=True)
                for c in ACTIVITY_LOG_CATEGORIES
            ],
            opts=child,
        )
        notifications = {
            f"actual-{t}": azure.consumption.NotificationArgs(
                enabled=True,
                operator="GreaterThan",
                threshold=float(t),
                threshold_type="Actual",
                contact_emails=list(cfg.budget.alert_emails),
            )
            for t in cfg.budget.alert_thresholds
        }
        notifications["forecast-100"] = azure.consumption.NotificationArgs(
            enabled=True,
            operator="GreaterThan",
            threshold=100.0,
            threshold_type="Forecasted",
            contact_emails=list(cfg.budget.alert_emails),
        )
        azure.consumption.Budget(
            f"{name}-budget",
            budget_name=f"{cfg.name}-monthly",
            scope=f"/subscriptions/{subscription}/resourceGroups/{resource_group}",
            amount=cfg.budget.monthly_amount,
            category="Cost",
            time_grain="Monthly",
            time_period=azure.consumption.BudgetTimePeriodArgs(start_date=budget_start(today)),
            notifications=notifications,
            # A later `up` in another month must not move the start (Azure refuses a change to it).
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["timePeriod.startDate"]),
        )
        self.register_outputs({})
