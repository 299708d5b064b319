"""Data residency: every resource in an EU region, and no resource whose location cannot be resolved."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .core import Context, Finding, Resource, Rule, get, is_unknown
from .location import AZURE_GLOBAL_TYPES, allowed, declared_location, has_location, normalize

_PROVIDER_CLOUDS = ("pulumi:providers:aws", "pulumi:providers:gcp", "pulumi:providers:azure-native")


def _located(resource_type: str) -> bool:
    if resource_type.startswith("pulumi:providers:"):
        return resource_type in _PROVIDER_CLOUDS
    return has_location(resource_type)


def _extra(ctx: Context) -> list[str]:
    return [str(r) for r in ctx.setting("allowedRegions", [])]


def check_residency(resource: Resource, ctx: Context) -> Iterator[str]:
    found = declared_location(resource)
    if found is None:
        return  # eu-location-resolvable reports it: one finding per problem.
    source, raw = found
    region = normalize(resource.cloud, raw)
    if region not in allowed(resource.cloud, _extra(ctx)):
        yield (
            f"'{resource.name}' would be created in {raw!r} (its {source}), outside the EU allow-list: use an EU "
            "region (e.g. eu-south-2, europe-southwest1, spaincentral) or add this one to the pack config "
            "`allowedRegions` with a reviewed transfer mechanism (GDPR art. 44-46)."
        )


def _azure_group_locations(resources: Sequence[Resource]) -> dict[str, str]:
    groups: dict[str, str] = {}
    for r in resources:
        if r.type == "azure-native:resources:ResourceGroup":
            loc = get(r.inputs, "location")
            if isinstance(loc, str) and not is_unknown(loc):
                groups[r.urn] = loc
                name = get(r.inputs, "resourceGroupName")
                groups[name if isinstance(name, str) and not is_unknown(name) else r.name] = loc
    return groups


def check_resolvable(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    groups = _azure_group_locations(resources)
    for r in resources:
        if not _located(r.type) or r.type in AZURE_GLOBAL_TYPES:
            continue
        if declared_location(r) is not None:
            continue
        if r.cloud == "azure":
            # azure-native resources without `location` inherit their resource group's.
            rg = get(r.inputs, "resourceGroupName")
            if any(d in groups for d in r.dependencies) or (isinstance(rg, str) and rg in groups):
                continue
        yield Finding(
            f"{r.type} '{r.name}' has no resolvable location: neither the resource nor its provider "
            "declares a region, so it would land in whatever the ambient CLI/credentials default to. Set "
            "the region on an explicit provider (aws `region`, gcp `region`, azure-native `location`) or "
            "on the resource.",
            r.urn,
        )


RULES = (
    Rule(
        name="eu-data-residency",
        description="Resources and provider regions stay inside the EU region allow-list.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Set the provider region / resource location to an EU region from the allow-list, or "
        "add an adequacy region to the pack config `allowedRegions` after a transfer impact assessment.",
        url="https://www.pulumi.com/registry/packages/aws/installation-configuration/#configuration-options",
        validate=check_residency,
        applies_to=_located,
        config_schema={"allowedRegions": {"type": "array", "items": {"type": "string"}}},
    ),
    Rule(
        name="eu-location-resolvable",
        description="Every cloud resource has a location the engine can resolve (no implicit default region).",
        kind="stack",
        severity="high",
        enforcement="mandatory",
        remediation="Declare an explicit provider with its region and pass it to every resource "
        "(`opts=pulumi.ResourceOptions(provider=...)`), or set `location` on the resource.",
        url="https://www.pulumi.com/docs/iac/concepts/resources/providers/#explicit-provider-configuration",
        validate=check_resolvable,
        applies_to=_located,
    ),
)
