"""What each cloud accepts, with where the bound comes from. Pure: no Pulumi.

AWS bounds are read from botocore's service models (the API definitions the AWS SDKs are generated
from) rather than repeated here, so a botocore upgrade that changes a range changes the check too.
Azure and GCP ship no machine-readable models in a library we use: their limits are constants, each
with the documentation (or the Azure REST spec text the azure-native SDK carries) that states it.
Every `Bound` carries its source, and the config errors print it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Bound:
    """An inclusive integer range and where it is defined."""

    minimum: int | None
    maximum: int | None
    source: str

    def admits(self, value: int) -> bool:
        return (self.minimum is None or value >= self.minimum) and (
            self.maximum is None or value <= self.maximum
        )

    def describe(self) -> str:
        lo = "" if self.minimum is None else f">= {self.minimum}"
        hi = "" if self.maximum is None else f"<= {self.maximum}"
        return f"{' and '.join(x for x in (lo, hi) if x)} ({self.source})"


@functools.cache
def _botocore_model(service: str) -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


def _shape(service: str, shape: str) -> Any:
    return _botocore_model(service).shape_for(shape)


def _member(service: str, operation: str, member: str) -> Any:
    return _botocore_model(service).operation_model(operation).input_shape.members[member]


def _range(service: str, shape: Any, name: str) -> Bound:
    meta = shape.metadata
    return Bound(meta.get("min"), meta.get("max"), f"botocore {service} model, {name}")


@functools.cache
def kms_rotation_days() -> Bound:
    """AWS KMS `RotationPeriodInDays` (EnableKeyRotation/CreateKey: 90..2560 today)."""
    return _range("kms", _shape("kms", "RotationPeriodInDaysType"), "RotationPeriodInDaysType")


@functools.cache
def cloudwatch_retention_days() -> tuple[int, ...]:
    """CloudWatch Logs `retentionInDays`: the model states the allowed values in the shape's documentation
    (PutRetentionPolicy rejects any other value), so they are read from there."""
    doc = _shape("logs", "Days").documentation
    listed = re.search(r"Possible values are:?\s*([0-9,\sand]+)", doc)
    if not listed:
        raise RuntimeError("botocore logs model: the Days shape no longer lists its values; update limits.py")
    return tuple(int(n) for n in re.findall(r"\d+", listed.group(1)))


@functools.cache
def aws_budget_notifications() -> Bound:
    """AWS Budgets: notifications per budget (CreateBudget NotificationsWithSubscribers)."""
    member = _member("budgets", "CreateBudget", "NotificationsWithSubscribers")
    return _range("budgets", member, "CreateBudget.NotificationsWithSubscribers")


@functools.cache
def aws_budget_subscribers() -> Bound:
    """AWS Budgets: e-mail subscribers per notification. The Subscribers list takes 1..11, but of those only one
    may be an SNS topic and at most 10 e-mail addresses: the model says so in NotificationWithSubscribers'
    documentation, so the e-mail bound is read from there."""
    member = _shape("budgets", "Subscribers")
    doc = _shape("budgets", "NotificationWithSubscribers").documentation
    emails = re.search(r"up to (\d+) email subscribers", doc)
    if not emails:
        raise RuntimeError(
            "botocore budgets model: NotificationWithSubscribers no longer states its e-mail limit; update limits.py"
        )
    return Bound(
        member.metadata.get("min"),
        int(emails.group(1)),
        "botocore budgets model, NotificationWithSubscribers: one SNS subscriber and up to "
        f"{emails.group(1)} email subscribers",
    )


@functools.cache
def iam_role_name() -> tuple[str, Bound]:
    """IAM role names: pattern and length (`roleNameType`)."""
    shape = _shape("iam", "roleNameType")
    return shape.metadata["pattern"], _range("iam", shape, "roleNameType")


@functools.cache
def iam_path_pattern() -> str:
    """IAM paths (`pathType`): `/` or `/segment/.../`."""
    return str(_shape("iam", "pathType").metadata["pattern"])


CLOUDWATCH_SOURCE = "botocore logs model, Days (PutRetentionPolicy retentionInDays)"

# Azure ---------------------------------------------------------------------------------------------------
# Log Analytics workspace `retentionInDays` (PerGB2018): 30..730 days of interactive retention; longer
# periods are "total retention" on tables, not the workspace setting.
LOG_ANALYTICS_RETENTION = Bound(
    30, 730, "learn.microsoft.com/azure/azure-monitor/logs/data-retention-configure, PerGB2018 workspace"
)
# consumption Budget `notifications`: "Budget can have up to five notifications" (Azure REST spec, as the
# azure-native SDK documents the property). The program adds one forecast notification to the thresholds.
AZURE_BUDGET_NOTIFICATIONS = Bound(
    1, 5, "Azure Consumption Budgets API: 'Budget can have up to five notifications' (azure-native docs)"
)
# Key Vault key rotation policy: a `Rotate` lifetime action at least 7 days after creation.
AZURE_KEY_ROTATION = Bound(7, None, "learn.microsoft.com/azure/key-vault/keys/how-to-configure-key-rotation")

# GCP -----------------------------------------------------------------------------------------------------
# Cloud Logging log buckets: retention from 1 to 3650 days.
GCP_LOG_BUCKET_RETENTION = Bound(1, 3650, "cloud.google.com/logging/docs/buckets#custom-retention")
# Project ids: 6-30 characters, lowercase letters, digits and hyphens, starting with a letter, not ending
# with a hyphen (cloud.google.com/resource-manager/docs/creating-managing-projects).
GCP_PROJECT_ID = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"
GCP_PROJECT_SOURCE = "cloud.google.com/resource-manager/docs/creating-managing-projects"

# Node pools: GKE node pools and AKS agent pools take exactly one machine type (GKE `machineType`, AKS
# `vmSize`); only EKS managed node groups accept several (`instanceTypes`).
SINGLE_MACHINE_TYPE: Mapping[str, str] = {
    "gcp": "a GKE node pool has one machineType (cloud.google.com/kubernetes-engine/docs/concepts/node-pools)",
    "azure": "an AKS agent pool has one vmSize (learn.microsoft.com/azure/aks/create-node-pools)",
}

# Kubernetes -----------------------------------------------------------------------------------------------
# resource.Quantity's serialization grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go): a signed
# decimal number with an optional binary (Ki..Ei), decimal (n, u, m, k, M..E) or exponent suffix.
K8S_QUANTITY = (
    r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
    r"(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?(?:\d+(?:\.\d*)?|\.\d+))?"
)
K8S_QUANTITY_SOURCE = "Kubernetes resource.Quantity, k8s.io/apimachinery/pkg/api/resource/quantity.go"
# The oldest minor the rendered objects run on: the Triton pods' preStop `sleep` action (infra/k8s/serving.py)
# is on by default from 1.30 (PodLifecycleSleepAction beta); an older API server refuses the field or drops it,
# and every scale-down drops requests again.
K8S_MIN_MINOR = Bound(
    30, None, "KEP-3960 pod lifecycle sleep action, beta and on by default in Kubernetes 1.30"
)
