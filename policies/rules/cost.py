"""Cost control: a budget with alerts per cloud; the required tags on every taggable resource."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .audit import clouds
from .core import Context, Finding, Resource, Rule, as_list, get, is_unknown, parse_json_document, types

REQUIRED_TAGS = ("project", "environment", "owner", "cost-centre", "data-classification")
BUDGETS = {
    "aws": ("aws:budgets/budget:Budget", "notifications"),
    "gcp": ("gcp:billing/budget:Budget", "thresholdRules"),
    "azure": ("azure-native:consumption:Budget", "notifications"),
}
# Where each taggable type keeps its tags/labels.
TAG_PATHS: Mapping[str, str] = {
    **{
        t: "tags"
        for t in (
            "aws:s3/bucket:Bucket",
            "aws:kms/key:Key",
            "aws:ecr/repository:Repository",
            "aws:eks/cluster:Cluster",
            "aws:eks/nodeGroup:NodeGroup",
            "aws:iam/role:Role",
            "aws:iam/policy:Policy",
            "aws:cloudwatch/logGroup:LogGroup",
            "aws:cloudtrail/trail:Trail",
            "aws:ec2/vpc:Vpc",
            "aws:ec2/subnet:Subnet",
            "aws:ec2/securityGroup:SecurityGroup",
            "aws:ec2/launchTemplate:LaunchTemplate",
            "aws:budgets/budget:Budget",
            "aws:sns/topic:Topic",
            "aws:sqs/queue:Queue",
            "aws:secretsmanager/secret:Secret",
            "azure-native:resources:ResourceGroup",
            "azure-native:storage:StorageAccount",
            "azure-native:keyvault:Vault",
            "azure-native:containerregistry:Registry",
            "azure-native:containerservice:ManagedCluster",
            "azure-native:containerservice:AgentPool",
            "azure-native:operationalinsights:Workspace",
            "azure-native:managedidentity:UserAssignedIdentity",
            "azure-native:network:VirtualNetwork",
        )
    },
    **{
        t: "labels"
        for t in (
            "gcp:storage/bucket:Bucket",
            "gcp:kms/cryptoKey:CryptoKey",
            "gcp:artifactregistry/repository:Repository",
            "gcp:compute/disk:Disk",
        )
    },
    "gcp:container/cluster:Cluster": "resourceLabels",
    "gcp:container/nodePool:NodePool": "nodeConfig.resourceLabels",
}


def check_budget(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    for cloud in sorted(clouds(resources)):
        token, alerts = BUDGETS[cloud]
        budgets = [r for r in resources if r.type == token]
        if not any(
            as_list(get(b.inputs, alerts))
            or isinstance(get(b.inputs, alerts), dict)
            and get(b.inputs, alerts)
            for b in budgets
        ):
            yield Finding(
                f"no {token} with {alerts}: declare a budget that alerts the owner before the spend lands.",
                None,
            )


def effective_tags(r: Resource) -> dict[str, Any] | None:
    """Resource tags merged over the provider's default tags/labels; None if unknown at preview."""
    own = get(r.inputs, TAG_PATHS[r.type])
    if is_unknown(own):
        return None
    merged: dict[str, Any] = {}
    # Provider config reaches the engine JSON-encoded ("defaultTags": "{\"tags\": {...}}").
    default_tags = parse_json_document(get(r.provider_inputs, "defaultTags")) or {}
    default_labels = parse_json_document(get(r.provider_inputs, "defaultLabels")) or {}
    for d in (default_tags.get("tags"), default_labels):
        if isinstance(d, dict):
            merged.update(d)
    if isinstance(own, dict):
        merged.update(own)
    return merged


def check_tags(r: Resource, ctx: Context) -> Iterator[str]:
    tags = effective_tags(r)
    if tags is None:
        return
    required = [str(t) for t in ctx.setting("requiredTags", list(REQUIRED_TAGS))]
    if r.cloud == "gcp":  # GCP label keys: lowercase, digits, '-' and '_'
        required = [t.lower() for t in required]
    missing = [t for t in required if t not in tags or tags[t] in ("", None)]
    if missing:
        yield f"missing required {TAG_PATHS[r.type]} {missing}: set them on the resource or through the provider's default tags/labels."


RULES = (
    Rule(
        name="budget-alerts",
        description="Each cloud in the stack has a budget that alerts before the money is spent.",
        kind="stack",
        severity="medium",
        enforcement="advisory",
        remediation="AWS: aws.budgets.Budget(notifications=[...]). GCP: gcp.billing.Budget(threshold_rules=[...]). Azure: consumption.Budget(notifications={...}).",
        url="https://docs.aws.amazon.com/cost-management/latest/userguide/budgets-managing-costs.html",
        validate=check_budget,
        applies_to=types(*(t for t, _ in BUDGETS.values())),
    ),
    Rule(
        name="required-tags",
        description="Every taggable resource carries project, environment, owner, cost-centre and data-classification.",
        kind="resource",
        severity="low",
        enforcement="advisory",
        remediation="Set the tags through the provider's default_tags (AWS) / default_labels (GCP) or on each resource (Azure).",
        url="https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html",
        validate=check_tags,
        applies_to=types(*TAG_PATHS),
        config_schema={"requiredTags": {"type": "array", "items": {"type": "string"}}},
    ),
)
