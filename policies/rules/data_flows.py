"""Residency beyond location: data must not leave the EU through a flow whose *destination* is elsewhere.

eu-data-residency checks where each resource is; this rule checks where its data is sent: bucket
replication, log sinks, diagnostic settings, backup copies and registry replication. A destination
must be in an allowed (EU) region, or be a resource declared in this stack (which eu-data-residency
locates). An unknown destination with a dependency edge on a declared resource is that resource; an
unknown one without is undetermined.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from .core import Context, Finding, Resource, Rule, as_list, get, is_unknown, undetermined
from .location import allowed, normalize

# type -> (cloud, [(path to a destination, kind)]); `[]` walks a list. kind "region" holds a region,
# kind "ref" a resource reference (ARN, id or URI) whose region is in it or which the stack declares.
FLOWS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "aws:s3/bucketReplicationConfig:BucketReplicationConfig": (
        "aws",
        [("rules[].destination.bucket", "ref")],
    ),
    "aws:ecr/replicationConfiguration:ReplicationConfiguration": (
        "aws",
        [("replicationConfiguration.rules[].destinations[].region", "region")],
    ),
    "aws:backup/plan:Plan": ("aws", [("rules[].copyActions[].destinationVaultArn", "ref")]),
    "aws:cloudwatch/logSubscriptionFilter:LogSubscriptionFilter": ("aws", [("destinationArn", "ref")]),
    "gcp:logging/projectSink:ProjectSink": ("gcp", [("destination", "ref")]),
    "gcp:logging/folderSink:FolderSink": ("gcp", [("destination", "ref")]),
    "gcp:logging/organizationSink:OrganizationSink": ("gcp", [("destination", "ref")]),
    "azure-native:monitor:DiagnosticSetting": (
        "azure",
        [("workspaceId", "ref"), ("storageAccountId", "ref"), ("eventHubAuthorizationRuleId", "ref")],
    ),
    "azure-native:monitor:SubscriptionDiagnosticSetting": (
        "azure",
        [("workspaceId", "ref"), ("storageAccountId", "ref"), ("eventHubAuthorizationRuleId", "ref")],
    ),
    "azure-native:insights:DiagnosticSetting": (
        "azure",
        [("workspaceId", "ref"), ("storageAccountId", "ref"), ("eventHubAuthorizationRuleId", "ref")],
    ),
}
_AWS_ARN_REGION = re.compile(r"^arn:aws[-a-z]*:[a-z0-9-]+:([a-z]{2}(?:-[a-z]+)+-\d):")
_GCP_LOCATION = re.compile(r"/locations/([a-z0-9-]+)/")


def values_at(data: Any, path: str) -> list[Any]:
    cur = [data]
    for part in path.split("."):
        key, walk = (part[:-2], True) if part.endswith("[]") else (part, False)
        nxt: list[Any] = []
        for node in cur:
            v = node if is_unknown(node) else get(node, key)
            if v is None:
                continue
            nxt += as_list(v) if walk and not is_unknown(v) else [v]
        cur = nxt
    return cur


def _declared_names(resources: Sequence[Resource]) -> set[str]:
    names: set[str] = set()
    for r in resources:
        names.add(r.name)
        for k in ("bucket", "name", "bucketId", "accountName", "workspaceName"):
            v = r.inputs.get(k)
            if isinstance(v, str) and not is_unknown(v):
                names.add(v)
    return names


def _region_of(cloud: str, ref: str) -> str | None:
    if cloud == "aws":
        m = _AWS_ARN_REGION.match(ref)
        return m.group(1) if m else None
    if cloud == "gcp":
        m = _GCP_LOCATION.search(ref + "/")
        return m.group(1) if m else None
    return None


def check_flows(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    urns = {r.urn for r in resources}
    names = _declared_names(resources)
    extra = [str(x) for x in ctx.setting("allowedRegions", [])]
    for r in resources:
        if r.type not in FLOWS:
            continue
        cloud, paths = FLOWS[r.type]
        eu = allowed(cloud, extra)
        for path, kind in paths:
            for value in values_at(r.inputs, path):
                if is_unknown(value):
                    if not (set(r.dependencies) & urns):
                        yield Finding(
                            undetermined(
                                f"{path} is unknown at preview and depends on nothing declared here"
                            ),
                            r.urn,
                        )
                    continue
                text = str(value)
                region = text if kind == "region" else _region_of(cloud, text)
                if region is not None and normalize(cloud, region) not in eu:
                    yield Finding(
                        f"{path} sends data to {region!r}, outside the EU allow-list: keep the destination in an EU "
                        "region (GDPR chapter V, art. 44).",
                        r.urn,
                    )
                elif region is None and kind == "ref" and not (names & set(re.split(r"[/:]", text))):
                    yield Finding(
                        f"{path}={text!r} names no resource of this stack and no EU region: send it to a "
                        "destination declared here, or one whose location the reference shows.",
                        r.urn,
                    )


RULES = (
    Rule(
        name="eu-data-flows",
        description="Replication, log sinks, diagnostic settings, backup copies and registry replication send data only to EU destinations.",
        kind="stack",
        severity="critical",
        enforcement="mandatory",
        remediation="Point replication, sinks, diagnostic settings and backup copies at destinations in EU regions declared in the stack; a reviewed non-EU region goes in allowedRegions.",
        url="https://commission.europa.eu/law/law-topic/data-protection/international-dimension-data-protection_en",
        validate=check_flows,
        applies_to=lambda t: t in FLOWS,
        config_schema={"allowedRegions": {"type": "array", "items": {"type": "string"}}},
    ),
)
