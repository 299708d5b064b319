"""The ids, and the computed outputs other resources read, that the GCP and Azure providers return on create:
update-mode plans (plan_mocks.py) give a created resource these instead of placeholders, so a value the program
derives from them (a key's `keyRing` from the ring's id, an IAM member's `serviceAccountId` from an account's
`name`, a role assignment's `scope` from an ARM id) has the format a real `pulumi up` gives it and can be judged
by the API's own definitions. Mixing up a resource's `.id` and `.name` is then caught before `up`.

Templates are filled from the resource's inputs (camelCase), and for GCP the provider's `project` and `region`
where the resource does not set them. `{x|last}` is the last path segment of `x` (a short name out of an id).
Values the server assigns (a channel's number, a budget's UUID, a key version) are derived from the logical name,
so renders stay reproducible.

GCP: the id is pulumi-gcp's first documented import format (its `## Import` docstrings, pulumi-gcp 10.x, i.e.
terraform-provider-google's `id` attribute); IAM members are `<resource>/<role>/<member>[/<condition title>]`
(resource_iam_member.go's SetId). Azure: the ARM id azure-native documents as each type's import id.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from typing import Any

GCP_IDS: dict[str, str] = {
    "gcp:artifactregistry/repository:Repository": (
        "projects/{project}/locations/{location}/repositories/{repositoryId}"
    ),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": (
        "projects/{project}/locations/{location}/repositories/{repository}/{role}/{member}"
    ),
    "gcp:billing/budget:Budget": "billingAccounts/{billingAccount}/budgets/{server_uuid}",
    "gcp:compute/network:Network": "projects/{project}/global/networks/{name}",
    "gcp:compute/router:Router": "projects/{project}/regions/{region}/routers/{name}",
    "gcp:compute/routerNat:RouterNat": "projects/{project}/regions/{region}/routers/{router}/{name}",
    "gcp:compute/subnetwork:Subnetwork": "projects/{project}/regions/{region}/subnetworks/{name}",
    "gcp:container/cluster:Cluster": "projects/{project}/locations/{location}/clusters/{name}",
    "gcp:container/nodePool:NodePool": "{project}/{location}/{cluster|last}/{name}",
    "gcp:kms/keyRing:KeyRing": "projects/{project}/locations/{location}/keyRings/{name}",
    "gcp:kms/cryptoKey:CryptoKey": "{keyRing}/cryptoKeys/{name}",
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": "{cryptoKeyId}/{role}/{member}",
    "gcp:logging/projectBucketConfig:ProjectBucketConfig": (
        "projects/{project}/locations/{location}/buckets/{bucketId}"
    ),
    "gcp:logging/projectSink:ProjectSink": "projects/{project}/sinks/{name}",
    "gcp:monitoring/alertPolicy:AlertPolicy": "projects/{project}/alertPolicies/{server_number}",
    "gcp:monitoring/notificationChannel:NotificationChannel": (
        "projects/{project}/notificationChannels/{server_number}"
    ),
    "gcp:projects/iAMAuditConfig:IAMAuditConfig": "{project}/audit_config/{service}",
    "gcp:projects/iAMMember:IAMMember": "{project}/{role}/{member}",
    "gcp:projects/service:Service": "{project}/{service}",
    "gcp:projects/serviceIdentity:ServiceIdentity": "projects/{project}/services/{service}",
    "gcp:pubsub/subscription:Subscription": "projects/{project}/subscriptions/{name}",
    "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember": (
        "projects/{project}/subscriptions/{subscription}/{role}/{member}"
    ),
    "gcp:pubsub/topic:Topic": "projects/{project}/topics/{name}",
    "gcp:pubsub/topicIAMMember:TopicIAMMember": "projects/{project}/topics/{topic}/{role}/{member}",
    "gcp:serviceaccount/account:Account": (
        "projects/{project}/serviceAccounts/{accountId}@{project}.iam.gserviceaccount.com"
    ),
    "gcp:serviceaccount/iAMMember:IAMMember": "{serviceAccountId}/{role}/{member}",
    "gcp:storage/bucket:Bucket": "{name}",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "b/{bucket}/{role}/{member}",
}

# Outputs that are not inputs echoed (filled in order, after `id`): the full resource names where the provider
# returns one as `name`, and the identities. From the output's docstring in pulumi-gcp.
GCP_OUTPUTS: dict[str, dict[str, str]] = {
    "gcp:serviceaccount/account:Account": {
        "name": "{id}",  # "The fully-qualified name of the service account"
        "email": "{accountId}@{project}.iam.gserviceaccount.com",
        "member": "serviceAccount:{email}",
        "uniqueId": "{server_number}",
    },
    "gcp:projects/serviceIdentity:ServiceIdentity": {
        "email": "service-{number}@{agent}.iam.gserviceaccount.com",
        "member": "serviceAccount:{email}",
    },
    "gcp:artifactregistry/repository:Repository": {"name": "{repositoryId}"},  # "for example: repo1"
    "gcp:logging/projectBucketConfig:ProjectBucketConfig": {"name": "{id}"},
    "gcp:monitoring/notificationChannel:NotificationChannel": {"name": "{id}"},
    "gcp:monitoring/alertPolicy:AlertPolicy": {"name": "{id}"},
    "gcp:billing/budget:Budget": {"name": "{id}"},
    "gcp:storage/bucket:Bucket": {
        "url": "gs://{name}",
        "selfLink": "https://www.googleapis.com/storage/v1/b/{name}",
    },
    "gcp:compute/network:Network": {"selfLink": "https://www.googleapis.com/compute/v1/{id}"},
    "gcp:compute/subnetwork:Subnetwork": {"selfLink": "https://www.googleapis.com/compute/v1/{id}"},
}

# The service agent generateServiceIdentity answers with, per API (cloud.google.com/iam/docs/service-agents).
GCP_SERVICE_AGENTS: dict[str, str] = {
    "artifactregistry.googleapis.com": "gcp-sa-artifactregistry",
    "container.googleapis.com": "container-engine-robot",
}

_RG = "/subscriptions/{subscription}/resourceGroups/{resourceGroupName}/providers/"
# The types of azure_names.AZURE_NAME_INPUTS, another fact: the ARM id format (its `{name}` is the name output, which
# azure_names says how the provider fills); lifecycle.FIXED_IDENTITY derives from azure_names, not from this.
AZURE_IDS: dict[str, str] = {
    "azure-native:resources:ResourceGroup": "/subscriptions/{subscription}/resourceGroups/{name}",
    "azure-native:storage:StorageAccount": _RG + "Microsoft.Storage/storageAccounts/{name}",
    "azure-native:storage:BlobServiceProperties": (
        _RG + "Microsoft.Storage/storageAccounts/{accountName}/blobServices/default"
    ),
    "azure-native:storage:BlobContainer": (
        _RG + "Microsoft.Storage/storageAccounts/{accountName}/blobServices/default/containers/{name}"
    ),
    "azure-native:storage:ManagementPolicy": (
        _RG + "Microsoft.Storage/storageAccounts/{accountName}/managementPolicies/{name}"
    ),
    "azure-native:keyvault:Vault": _RG + "Microsoft.KeyVault/vaults/{name}",
    "azure-native:keyvault:Key": _RG + "Microsoft.KeyVault/vaults/{vaultName}/keys/{name}",
    "azure-native:containerregistry:Registry": _RG + "Microsoft.ContainerRegistry/registries/{name}",
    "azure-native:containerservice:ManagedCluster": _RG + "Microsoft.ContainerService/managedClusters/{name}",
    "azure-native:containerservice:AgentPool": (
        _RG + "Microsoft.ContainerService/managedClusters/{resourceName}/agentPools/{name}"
    ),
    "azure-native:compute:DiskEncryptionSet": _RG + "Microsoft.Compute/diskEncryptionSets/{name}",
    "azure-native:managedidentity:UserAssignedIdentity": (
        _RG + "Microsoft.ManagedIdentity/userAssignedIdentities/{name}"
    ),
    "azure-native:managedidentity:FederatedIdentityCredential": (
        _RG
        + "Microsoft.ManagedIdentity/userAssignedIdentities/{resourceName}/federatedIdentityCredentials/{name}"
    ),
    "azure-native:authorization:RoleAssignment": "{scope}/providers/Microsoft.Authorization/roleAssignments/{name}",
    "azure-native:authorization:RoleDefinition": "{scope}/providers/Microsoft.Authorization/roleDefinitions/{name}",
    "azure-native:consumption:Budget": "{scope}/providers/Microsoft.Consumption/budgets/{name}",
    "azure-native:operationalinsights:Workspace": _RG + "Microsoft.OperationalInsights/workspaces/{name}",
    "azure-native:monitor:ActionGroup": _RG + "Microsoft.Insights/actionGroups/{name}",
    "azure-native:monitor:MetricAlert": _RG + "Microsoft.Insights/metricAlerts/{name}",
    "azure-native:monitor:DiagnosticSetting": "{resourceUri}/providers/Microsoft.Insights/diagnosticSettings/{name}",
    "azure-native:monitor:SubscriptionDiagnosticSetting": (
        "/subscriptions/{subscription}/providers/Microsoft.Insights/diagnosticSettings/{name}"
    ),
    "azure-native:network:VirtualNetwork": _RG + "Microsoft.Network/virtualNetworks/{name}",
    "azure-native:network:Subnet": _RG
    + "Microsoft.Network/virtualNetworks/{virtualNetworkName}/subnets/{name}",
    "azure-native:network:NatGateway": _RG + "Microsoft.Network/natGateways/{name}",
    "azure-native:network:PublicIPAddress": _RG + "Microsoft.Network/publicIPAddresses/{name}",
}

# Key Vault's data-plane URLs (learn.microsoft.com/azure/key-vault/general/about-keys-secrets-certificates#object-
# identifiers): a vault's `properties.vaultUri`, a key's `keyUri` and `keyUriWithVersion` (a 32-hex version).
AZURE_OUTPUTS: dict[str, dict[str, str]] = {
    "azure-native:keyvault:Vault": {"properties.vaultUri": "https://{name}.vault.azure.net/"},
    "azure-native:keyvault:Key": {
        "keyUri": "https://{vaultName}.vault.azure.net/keys/{name}",
        "keyUriWithVersion": "{keyUri}/{server_hex}",
    },
}

_FIELD = re.compile(r"\{(\w+)(\|last)?\}")


class MissingIdTemplate(LookupError):
    """A resource type with no id template: add it to GCP_IDS or AZURE_IDS."""


def fill(template: str, fields: Mapping[str, Any], where: str) -> str:
    """`template` with each `{field}` (or `{field|last}`) replaced; KeyError naming what is missing."""

    def one(found: re.Match[str]) -> str:
        value = fields.get(found[1])
        if not isinstance(value, str):
            raise KeyError(f"{where}: {template!r} needs a string {found[1]!r}, got {value!r}")
        return value.rsplit("/", 1)[-1] if found[2] else value

    return _FIELD.sub(one, template)


def server_values(typ: str, name: str) -> dict[str, str]:
    """What a server assigns (a number, a UUID, a version), derived from the logical name: reproducible."""
    digest = hashlib.sha256(f"{typ}::{name}".encode()).hexdigest()
    return {
        "server_number": str(int(digest[:15], 16)),
        "server_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{typ}::{name}")),
        "server_hex": digest[:32],
    }


def outputs(
    typ: str, name: str, state: Mapping[str, Any], context: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    """(id, outputs) for a created GCP or Azure resource: `state` its echoed inputs (and Azure's `name`
    output), `context` what it takes from elsewhere (project, region, subscription, project number)."""
    ids, extra = (AZURE_IDS, AZURE_OUTPUTS) if typ.startswith("azure-native:") else (GCP_IDS, GCP_OUTPUTS)
    if typ not in ids:
        table = "AZURE_IDS" if ids is AZURE_IDS else "GCP_IDS"
        raise MissingIdTemplate(
            f"{typ}: no id template; add the provider's id format to infra/plan_ids.{table}"
        )
    fields: dict[str, Any] = {**context, **server_values(typ, name), **state}
    if typ == "gcp:projects/serviceIdentity:ServiceIdentity":
        if state.get("service") not in GCP_SERVICE_AGENTS:
            # Loud, not the placeholder fallback: the keys' grants read this identity's `member`.
            raise KeyError(
                f"{typ}: no agent for {state.get('service')!r}; add it to plan_ids.GCP_SERVICE_AGENTS"
            )
        fields["agent"] = GCP_SERVICE_AGENTS[state["service"]]
    fields["id"] = fill(ids[typ], fields, typ)
    resource_id = fields["id"] + _condition_suffix(typ, state)
    out: dict[str, Any] = {}
    for key, template in extra.get(typ, {}).items():
        fields[key] = value = fill(template, fields, f"{typ} {key}")
        _set(out, key, value)
    return resource_id, out


def _condition_suffix(typ: str, state: Mapping[str, Any]) -> str:
    condition = state.get("condition")
    if typ.startswith("gcp:") and typ.lower().endswith("iammember") and isinstance(condition, dict):
        return f"/{condition.get('title', '')}"
    return ""


def _set(out: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for p in parents:
        out = out.setdefault(p, {})
    out[last] = value


def preview_unknown(typ: str) -> list[str]:
    """The top-level outputs of the tables a preview does not know (computed on create)."""
    return sorted({k.split(".")[0] for k in {**GCP_OUTPUTS, **AZURE_OUTPUTS}.get(typ, {})})
