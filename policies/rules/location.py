"""Where a resource lives, and whether that is inside the EU (GDPR art. 44-46, data residency).

The allow-lists name EU member-state regions only: London (eu-west-2, europe-west2, uksouth) and
Zurich (eu-central-2, europe-west6, switzerlandnorth) are adequacy countries, not EU, so a team
that wants them adds them through the pack config (`allowedRegions`) with a reviewed reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .core import Resource, get, is_unknown

# Deliberately not imported from infra/config.py (which has its own list for the program): the pack
# audits that program and runs in its own virtualenv, so it keeps an independent, reviewed copy.
EU_REGIONS: Mapping[str, frozenset[str]] = {
    "aws": frozenset({"eu-central-1", "eu-west-1", "eu-west-3", "eu-south-1", "eu-south-2", "eu-north-1"}),
    "gcp": frozenset(
        {
            "eu",  # the EU multi-region (storage, artifact registry)
            "eur4",  # dual-region Netherlands + Finland
            "europe-west1",
            "europe-west3",
            "europe-west4",
            "europe-west8",
            "europe-west9",
            "europe-west10",
            "europe-west12",
            "europe-north1",
            "europe-north2",
            "europe-central2",
            "europe-southwest1",
        }
    ),
    "azure": frozenset(
        {
            "westeurope",
            "northeurope",
            "francecentral",
            "francesouth",
            "germanywestcentral",
            "germanynorth",
            "swedencentral",
            "swedensouth",
            "italynorth",
            "spaincentral",
            "polandcentral",
            "austriaeast",
            "belgiumcentral",
        }
    ),
}

# Types that have no location of their own and hold no data: Kubernetes objects live in their
# cluster (whose location is checked), pulumi-internal and random resources never leave the engine.
LOCATIONLESS_PREFIXES = ("kubernetes:", "pulumi:pulumi:", "random:", "pulumi-nodejs:", "eu-ml-platform:")
# Azure resources that are global by design: their data, if any, follows their parent.
AZURE_GLOBAL_TYPES = frozenset(
    {
        "azure-native:authorization:RoleAssignment",
        "azure-native:authorization:RoleDefinition",
        "azure-native:insights:DiagnosticSetting",
        "azure-native:monitor:DiagnosticSetting",
        "azure-native:consumption:Budget",
        "azure-native:managedidentity:FederatedIdentityCredential",
        "azure-native:keyvault:Key",
        "azure-native:storage:BlobContainer",
        "azure-native:storage:BlobServiceProperties",
        "azure-native:storage:ManagementPolicy",
        "azure-native:containerservice:AgentPool",
    }
)

_ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")


def normalize(cloud: str, location: str) -> str:
    loc = location.strip().lower()
    if cloud == "azure":
        return loc.replace(" ", "")
    m = _ZONE.match(loc)
    if m and cloud == "gcp":
        return m.group(1)
    if cloud == "aws" and re.match(r"^[a-z]{2}-[a-z]+-\d[a-z]$", loc):  # an availability zone
        return loc[:-1]
    return loc


def allowed(cloud: str, extra: Sequence[str] = ()) -> frozenset[str]:
    return EU_REGIONS.get(cloud, frozenset()) | {normalize(cloud, e) for e in extra}


def declared_location(resource: Resource) -> tuple[str, str] | None:
    """(where it came from, raw value) of the resource's own location, else its provider's."""
    keys = {
        "aws": ("region",),
        "gcp": ("location", "region", "zone"),
        "azure": ("location",),
    }.get(resource.cloud, ())
    if resource.is_provider:
        provider_keys = {"aws": ("region",), "gcp": ("region", "zone"), "azure": ("location",)}
        for key in provider_keys.get(resource.cloud, ()):
            value = get(resource.inputs, key)
            if isinstance(value, str) and value and not is_unknown(value):
                return (f"provider {key}", value)
        return None
    for key in keys:
        value = get(resource.inputs, key)
        if isinstance(value, str) and value and not is_unknown(value):
            return (key, value)
    for key in {"aws": ("region",), "gcp": ("region", "zone"), "azure": ("location",)}.get(
        resource.cloud, ()
    ):
        value = get(resource.provider_inputs, key)
        if isinstance(value, str) and value and not is_unknown(value):
            return (f"provider {key}", value)
    return None


def has_location(resource_type: str) -> bool:
    return not resource_type.startswith(LOCATIONLESS_PREFIXES) and resource_type.split(":", 1)[0] in {
        "aws",
        "gcp",
        "azure-native",
        "pulumi",
    }
