"""What each cloud accepts, with where the bound comes from. Pure: no Pulumi.

AWS bounds are read from botocore's service models (the API definitions the AWS SDKs are generated
from) rather than repeated here, so a botocore upgrade that changes a range changes the check too.
Azure's and GCP's machine-readable definitions (the azure-mgmt SDKs, Google's discovery documents) are
test dependencies only: their limits are constants here, each with the documentation or REST spec that
states it, and tests/infra/test_infra_{gcp,azure}_api_values.py judge the plans by those definitions.
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


@functools.cache
def aws_tags() -> Bound:
    """Tags on one AWS resource (EKS CreateNodegroup `tags`, TagMap: 50 today; EC2 instances, IAM, CloudWatch
    Logs and the others take as many, EC2 by its documented tag restrictions rather than a model bound)."""
    return _range("eks", _shape("eks", "TagMap"), "TagMap; EC2 User Guide, tag restrictions")


CLOUDWATCH_SOURCE = "botocore logs model, Days (PutRetentionPolicy retentionInDays)"


@functools.cache
def ec2_instance_types() -> frozenset[str]:
    """EC2 instance types (`InstanceType`, the enum RunInstances and launch templates take): EKS's CreateNodegroup
    `instanceTypes` is a bare string list in its model, so a typo only fails when the node group is created."""
    return frozenset(_shape("ec2", "InstanceType").enum)


EC2_INSTANCE_TYPE_SOURCE = "botocore ec2 model, InstanceType"


@functools.cache
def eks_nodegroup_instance_types() -> Bound:
    """Instance types per EKS managed node group: the model states the bound in `instanceTypes`' documentation
    ("0-20 instance types" with a launch template, as every pool here has), so it is read from there."""
    doc = _member("eks", "CreateNodegroup", "instanceTypes").documentation
    listed = re.search(r"(\d+)-(\d+) instance types", doc)
    if not listed:
        raise RuntimeError("botocore eks model: instanceTypes no longer states its bound; update limits.py")
    return Bound(
        int(listed.group(1)), int(listed.group(2)), "botocore eks model, CreateNodegroup.instanceTypes"
    )


@functools.cache
def ecr_repository_name() -> tuple[str, Bound]:
    """ECR repository names (`RepositoryName`): lowercase letters, digits and separators, 2..256."""
    shape = _shape("ecr", "RepositoryName")
    return shape.metadata["pattern"], _range("ecr", shape, "RepositoryName")


# S3 general purpose bucket names: 3-63 lowercase letters, digits, '.' and '-', starting and ending with a letter
# or digit. botocore's CreateBucket `Bucket` carries no pattern, only the link to these rules.
S3_BUCKET_NAME = Bound(3, 63, "docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html")
S3_BUCKET_NAME_PATTERN = r"[a-z0-9][a-z0-9.-]*[a-z0-9]"

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
# Tags on one Azure resource. Storage accounts too: the REST spec's StorageAccountCreateParameters.tags still says
# "A maximum of 15 tags", a sentence from before 2020 (Microsoft's tagging page then: "storage accounts only support
# 15 tags, but that limit will be raised to 50"; terraform-provider-azurerm#5934 raised its check to 50 in 2020).
AZURE_TAGS = Bound(
    None, 50, "learn.microsoft.com/azure/azure-resource-manager/management/tag-resources#limitations"
)
# Key Vault key rotation policy: a `Rotate` lifetime action at least 7 days after creation.
AZURE_KEY_ROTATION = Bound(7, None, "learn.microsoft.com/azure/key-vault/keys/how-to-configure-key-rotation")
# Globally unique Azure names built from org + stack (`infra/naming.py` compact_name: `<org>mlp<stack><purpose>`,
# lowercase letters and digits only). The longest purposes are the storage accounts' `data`/`logs`; the REST
# specs bound both path parameters to 24 characters (tests/infra/azure_api_table.py checks the plan against
# them): a longer org + stack would stop the preview halfway, so the config refuses it.
# The stack name is part of Azure names whose rules refuse `_` and `.` (which Pulumi stack names may hold) and
# a hyphen at either end: the Log Analytics workspace `log-mlp-<stack>` (REST spec pattern), the AKS `dnsPrefix`
# `mlp-<stack>` and managed identities `id-mlp-<stack>-...` (Microsoft's resource-name-rules).
# AKS puts a cluster's nodes in a resource group of its own, `MC_<resource group>_<cluster>_<location>` unless
# `nodeResourceGroup` is set, and refuses the create when that name is longer than 80 (resource groups take 90
# elsewhere). The REST spec has no bound (a free string): the AKS resource provider's error states it.
AKS_NODE_RESOURCE_GROUP = Bound(
    None, 80, 'AKS: "The length of the node resource group name is too long. The maximum length is 80", '
    "aka.ms/aks-naming-rules",
)  # fmt: skip
AZURE_STACK_NAME = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
AZURE_STACK_NAME_SOURCE = "Azure's AKS dnsPrefix and workspace name rules, tests/infra/azure_api_table.py"
# purpose -> (what, its name's bound); `acr` is the container registry (5-50 alphanumerics).
AZURE_COMPACT_NAMES: Mapping[str, tuple[str, Bound]] = {
    "data": ("storage account", Bound(3, 24, "Azure REST spec Microsoft.Storage StorageAccountName")),
    "logs": ("storage account", Bound(3, 24, "Azure REST spec Microsoft.Storage StorageAccountName")),
    "kv": ("key vault", Bound(3, 24, "Azure REST spec Microsoft.KeyVault VaultName ^[a-zA-Z0-9-]{3,24}$")),
    "acr": ("container registry", Bound(5, 50, "Azure REST spec Microsoft.ContainerRegistry RegistryName")),
}

# GCP -----------------------------------------------------------------------------------------------------
# Cloud Logging log buckets: retention from 1 to 3650 days.
GCP_LOG_BUCKET_RETENTION = Bound(1, 3650, "cloud.google.com/logging/docs/buckets#custom-retention")
# Project ids: 6-30 characters, lowercase letters, digits and hyphens, starting with a letter, not ending
# with a hyphen (cloud.google.com/resource-manager/docs/creating-managing-projects).
GCP_PROJECT_ID = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"
GCP_PROJECT_SOURCE = "cloud.google.com/resource-manager/docs/creating-managing-projects"
# Service account ids, `mlp-<stack>-<identity>` (infra/gcp/roles.account_id): the IAM API's
# CreateServiceAccountRequest.accountId "must be 6-30 characters long, and match the regular expression
# `[a-z]([-a-z0-9]*[a-z0-9])`". Stated in the iam.v1 discovery document, which only the tests have
# (google-api-python-client): tests/infra/test_infra_gcp_api_values.py checks these two against it.
GCP_SERVICE_ACCOUNT_ID = Bound(6, 30, "Google IAM API, CreateServiceAccountRequest.accountId")
GCP_SERVICE_ACCOUNT_ID_PATTERN = r"[a-z]([-a-z0-9]*[a-z0-9])"
# The bootstrap's workload identity pool, `<name>-github` (infra/bootstrap/gcp.py): the IAM API's
# workloadIdentityPools.create says "4-32 characters, and may contain the characters [a-z0-9-]. The prefix
# `gcp-` is reserved"; checked against the iam.v1 discovery document like the two above.
GCP_WORKLOAD_IDENTITY_POOL_ID = Bound(
    4, 32, "Google IAM API, workloadIdentityPools.create workloadIdentityPoolId"
)
GCP_WORKLOAD_IDENTITY_POOL_ID_PATTERN = r"(?!gcp-)[a-z0-9-]+"
# Labels a resource may carry (the `tags` plus the program's own, infra/naming.tags).
GCP_LABELS = Bound(0, 64, "cloud.google.com/resource-manager/docs/labels-overview#requirements")
# pulumi-gcp 8+ adds its own label, `goog-pulumi-provisioned`, to every labelled resource (its 8.0 migration
# guide, "Default label"; the stack's provider does not set addPulumiAttributionLabel false): one label more on
# each resource than the plan shows.
GCP_PROVIDER_LABELS = 1

# Node pools: GKE node pools and AKS agent pools take exactly one machine type (GKE `machineType`, AKS
# `vmSize`); only EKS managed node groups accept several (`instanceTypes`).
SINGLE_MACHINE_TYPE: Mapping[str, str] = {
    "gcp": "a GKE node pool has one machineType (cloud.google.com/kubernetes-engine/docs/concepts/node-pools)",
    "azure": "an AKS agent pool has one vmSize (learn.microsoft.com/azure/aks/create-node-pools)",
}
# A regional GKE cluster's pools span three zones of the region (no node locations named), and a pool's initial
# node count is per zone: a pool that starts with nodes starts with at least one in each zone.
GKE_REGIONAL_ZONES = 3
GKE_REGIONAL_ZONES_SOURCE = "cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters#overview"


def gke_initial_nodes_per_zone(min_nodes: int) -> int:
    """A non-GPU pool's `initial_node_count` (per zone): the fewest that reach its total minimum, at least one
    so the system pods have somewhere to run before the autoscaler acts. The pool starts with this times
    GKE_REGIONAL_ZONES nodes, which its total maximum must hold."""
    return -(-max(min_nodes, 1) // GKE_REGIONAL_ZONES)


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


# Tags (GCP: labels) per resource, all clouds ---------------------------------------------------------------
# infra/naming.tags gives every resource the stack's `tags`, `stack`, `managed-by` and one of
# purpose/pool/image/identity.
PLATFORM_TAG_KEYS = ("stack", "managed-by")
PLATFORM_TAGS_PER_RESOURCE = 1


def resource_tags(cloud: str) -> tuple[Bound, int, str]:
    """The bound on the tags of the cloud's most-tagged resource (for its type), how many tags that resource gets
    beyond the platform's own, and what it is (for the error)."""
    return {
        # The launch template tags each node's instance; EKS's Auto Scaling group adds (propagated at launch)
        # eks:cluster-name, eks:nodegroup-name, kubernetes.io/cluster/<name>, k8s.io/cluster-autoscaler/enabled
        # and k8s.io/cluster-autoscaler/<name>. Only `aws:` tags are free of the 50: a node over it never starts.
        "aws": (aws_tags(), 5, "each node's EC2 instance (+ EKS's 5 Auto Scaling group tags)"),
        "azure": (AZURE_TAGS, 0, "each resource"),
        "gcp": (GCP_LABELS, GCP_PROVIDER_LABELS, "each resource (+ pulumi-gcp's goog-pulumi-provisioned)"),
    }[cloud]
