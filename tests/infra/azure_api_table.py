"""Which ARM request each azure-native resource type of the Azure stack becomes, judged by Azure's own REST
definitions as the azure-mgmt-* SDKs carry them (azure_sdk_schema.py).

azure-native resources ARE the ARM bodies: a resource's inputs are the body's top-level members plus its
`properties.*` members flattened to the top level (camelCase, `odata.type` -> `odataType`), and the URL path
parameters (accountName, vaultName, ...). So the mapping is automatic: the table names only the body model and
the path parameters; a plan input that is neither fails the coverage test.

`provider` is the ARM API version pulumi-azure-native 3.29's default module sends ("Uses Azure REST API version
..." in its docstrings); `sdk` the version of the model judged (the SDK in the lock, the closest it ships).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Spec:
    """Path-parameter constraints the REST spec states but a TypeSpec-generated SDK does not keep; `doc` is a
    phrase the SDK's own docstring for the parameter says (checked, so a changed spec shows up here)."""

    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    doc: str = ""
    source: str = ""


@dataclass(frozen=True)
class Api:
    model: str  # "<module>:<class>" of the request body
    provider: str
    sdk: str
    # plan input -> REST path parameter: a Spec, or "<operations module>" whose request builders hold them
    path: dict[str, Spec | str] = field(default_factory=dict)
    # body members the spec constrains where the SDK model does not (REST name -> Spec)
    body: dict[str, Spec] = field(default_factory=dict)


M = "azure.mgmt."
# common-types v5 ResourceGroupNameParameter (every ARM resource group scoped path).
RG = Spec(
    1, 90, r"^[-\w\._\(\)]+$", "", "azure-rest-api-specs common-types/resource-management/v5 types.json"
)
RG_MSREST = (
    f"{M}compute.operations._disk_encryption_sets_operations"  # the same parameter, from an msrest SDK
)
STORAGE = Spec(3, 24, r"^[a-z0-9]+$", "between 3 and 24 characters in length and use numbers and lower-case",
               "Microsoft.Storage storage.json StorageAccountName")  # fmt: skip
AKS_NAME = Spec(1, 63, r"^[a-zA-Z0-9]$|^[a-zA-Z0-9][-_a-zA-Z0-9]{0,61}[a-zA-Z0-9]$", "name of the managed cluster",
                "Microsoft.ContainerService managedClusters.json ResourceNameParameter")  # fmt: skip
MSI = f"{M}msi.v2024_11_30.operations._federated_identity_credentials_operations"
# Where neither the SDK nor the spec bounds a name, Microsoft's naming rules for the resource type do.
RULES = "learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules"
NETWORK_NAME = r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9_])?$"  # start alphanumeric, end alphanumeric or `_`
MONITOR_NAME = r"^[^*#&+:<>?@%{}\\/|]*[^*#&+:<>?@%{}\\/|. ]$"  # none of these, not ending in `.` or space


def rule(lo: int, hi: int, pattern: str, what: str) -> Spec:
    return Spec(lo, hi, pattern, "", f"{RULES}, {what}")


TABLE: dict[str, Api] = {
    "azure-native:resources:ResourceGroup": Api(
        f"{M}resource.resources.models:ResourceGroup", "2024-03-01", "2025-04-01", {"resourceGroupName": RG}
    ),
    "azure-native:storage:StorageAccount": Api(
        f"{M}storage.models:StorageAccountCreateParameters", "2024-01-01", "2026-09-01",
        {"accountName": STORAGE, "resourceGroupName": RG},
    ),
    "azure-native:storage:BlobServiceProperties": Api(
        f"{M}storage.models:BlobServiceProperties", "2024-01-01", "2026-09-01",
        {"accountName": STORAGE, "resourceGroupName": RG,
         "blobServicesName": Spec(7, 7, "^default$", "", "storage blob.json BlobServicesName")},
    ),
    "azure-native:storage:BlobContainer": Api(
        f"{M}storage.models:BlobContainer", "2024-01-01", "2026-09-01",
        {"accountName": STORAGE, "resourceGroupName": RG,
         "containerName": Spec(3, 63, r"^[a-z0-9](?!.*--)[-a-z0-9]*[a-z0-9]$", "Every dash (-) character must be immediately preceded",
                               "storage blob.json ContainerName; the hyphen rules: Blob service naming docs")},
    ),
    "azure-native:storage:ManagementPolicy": Api(
        f"{M}storage.models:ManagementPolicy", "2024-01-01", "2026-09-01",
        {"accountName": STORAGE, "resourceGroupName": RG,
         "managementPolicyName": Spec(7, 7, "^default$", "", "storage.json ManagementPolicyName enum [default]")},
    ),
    "azure-native:keyvault:Vault": Api(
        f"{M}keyvault.models:VaultCreateOrUpdateParameters", "2024-11-01", "2026-05-15",
        {"vaultName": Spec(3, 24, r"^[a-zA-Z0-9-]{3,24}$", "vault", "keyvault.json VaultName pattern"),
         "resourceGroupName": RG},
    ),
    "azure-native:keyvault:Key": Api(
        f"{M}keyvault.models:KeyCreateParameters", "2024-11-01", "2026-05-15",
        {"vaultName": Spec(3, 24, r"^[a-zA-Z0-9-]{3,24}$", "", "keyvault.json VaultName pattern"),
         "keyName": Spec(1, 127, r"^[a-zA-Z0-9-]{1,127}$", "", "keys.json keyName pattern"), "resourceGroupName": RG},
    ),
    "azure-native:containerregistry:Registry": Api(
        f"{M}containerregistry.models:Registry", "2023-01-01-preview", "2025-11-01",
        {"registryName": Spec(5, 50, r"^[a-zA-Z0-9]*$", "", "containerregistry.json RegistryNameParameter"),
         "resourceGroupName": RG},
    ),
    "azure-native:containerservice:ManagedCluster": Api(
        f"{M}containerservice.models:ManagedCluster", "2025-09-01", "2026-08-01",
        {"resourceName": AKS_NAME, "resourceGroupName": RG},
        {"dnsPrefix": Spec(1, 54, r"^[a-zA-Z0-9]$|^[a-zA-Z0-9][-a-zA-Z0-9]{0,52}[a-zA-Z0-9]$", "",
                           f"{RULES}, AKS dnsPrefix")},
    ),
    "azure-native:containerservice:AgentPool": Api(
        f"{M}containerservice.models:AgentPool", "2025-09-01", "2026-08-01",
        {"resourceName": AKS_NAME, "resourceGroupName": RG,
         # Linux pools; Windows ones take 6 characters ("Windows agent pool names must be 6 characters or less").
         "agentPoolName": Spec(1, 12, r"^[a-z][a-z0-9]{0,11}$", "", "managedClusters.json AgentPoolNameParameter")},
    ),
    "azure-native:compute:DiskEncryptionSet": Api(
        f"{M}compute.models:DiskEncryptionSet", "2024-03-02", "2025-01-02",
        {"diskEncryptionSetName": rule(1, 80, r"^[A-Za-z0-9_-]+$", "diskEncryptionSets"),
         "resourceGroupName": RG_MSREST},
    ),
    "azure-native:managedidentity:UserAssignedIdentity": Api(
        f"{M}msi.v2024_11_30.models:Identity", "2023-01-31", "2024-11-30",
        {"resourceName": rule(3, 128, r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$", "userAssignedIdentities"),
         "resourceGroupName": RG_MSREST},
    ),
    "azure-native:managedidentity:FederatedIdentityCredential": Api(
        f"{M}msi.v2024_11_30.models:FederatedIdentityCredential", "2023-01-31", "2024-11-30",
        {"federatedIdentityCredentialResourceName": MSI, "resourceGroupName": MSI,
         "resourceName": rule(3, 128, r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$", "userAssignedIdentities")},
    ),
    "azure-native:authorization:RoleAssignment": Api(
        f"{M}authorization.v2022_04_01.models:RoleAssignmentCreateParameters", "2022-04-01", "2022-04-01",
        {k: f"{M}authorization.v2022_04_01.operations._role_assignments_operations"
         for k in ("scope", "roleAssignmentName")},
    ),
    "azure-native:authorization:RoleDefinition": Api(
        f"{M}authorization.v2022_05_01_preview.models:RoleDefinition", "2022-05-01-preview", "2022-05-01-preview",
        {"scope": f"{M}authorization.v2022_05_01_preview.operations._role_definitions_operations",
         "roleDefinitionId": f"{M}authorization.v2022_05_01_preview.operations._role_definitions_operations"},
    ),
    "azure-native:consumption:Budget": Api(
        f"{M}consumption.models:Budget", "2024-08-01", "2024-08-01", {"scope": Spec(1), "budgetName": rule(1, 63, r"^[A-Za-z0-9_-]+$", "budgets")}
    ),
    "azure-native:operationalinsights:Workspace": Api(
        f"{M}loganalytics.models:Workspace", "2023-09-01", "2025-07-01",
        {"workspaceName": Spec(4, 63, r"^[A-Za-z0-9][A-Za-z0-9-]+[A-Za-z0-9]$", "",
                               "OperationalInsights common.json WorkspaceNameParameter"), "resourceGroupName": RG},
    ),
    "azure-native:monitor:ActionGroup": Api(
        f"{M}monitor.models:ActionGroupResource", "2024-10-01-preview", "2023-01-01",
        {"actionGroupName": rule(1, 260, MONITOR_NAME, "actionGroups"), "resourceGroupName": RG_MSREST},
    ),
    "azure-native:monitor:MetricAlert": Api(
        f"{M}monitor.models:MetricAlertResource", "2018-03-01", "2018-03-01",
        {"ruleName": rule(1, 260, MONITOR_NAME, "metricAlerts"), "resourceGroupName": RG_MSREST},
    ),
    **{f"azure-native:network:{t}": Api(
        f"{M}network.models:{t}", "2024-05-01", "2026-03-01",
        {"resourceGroupName": RG, **{p: rule(lo, hi, NETWORK_NAME, p) for p, lo, hi in names}},
    ) for t, names in (
        ("VirtualNetwork", [("virtualNetworkName", 2, 64)]),
        ("Subnet", [("virtualNetworkName", 2, 64), ("subnetName", 1, 80)]),
        ("NatGateway", [("natGatewayName", 1, 80)]), ("PublicIPAddress", [("publicIpAddressName", 1, 80)]))},
}  # fmt: skip

# azure-native's own names for REST members (x-ms-client-name and its renames):
# "<azure.mgmt package>.<model class>" -> plan key -> REST name.
RENAMED: dict[str, dict[str, str]] = {
    "authorization.RoleDefinition": {"roleType": "properties.type"},
    "storage.StorageAccountPropertiesCreateParameters": {
        "enableHttpsTrafficOnly": "supportsHttpsTrafficOnly"
    },
    "storage.Encryption": {"keyVaultProperties": "keyvaultproperties", "encryptionIdentity": "identity"},
    "storage.KeyVaultProperties": {
        "keyName": "keyname",
        "keyVersion": "keyversion",
        "keyVaultUri": "keyvaulturi",
    },
    "storage.EncryptionIdentity": {
        "encryptionUserAssignedIdentity": "userAssignedIdentity",
        "encryptionFederatedIdentityClientId": "federatedIdentityClientId",
    },
}

# Resource types whose ARM API no SDK in the lock models (azure-mgmt-monitor 7 dropped diagnostic settings):
# the inputs are listed so coverage stays exact, and their values are counted as unmodelled, not checked.
UNMODELLED: dict[str, dict[str, str]] = {
    t: {"name": "path parameter name", "logs": "properties.logs (category strings are per resource type)",
        "workspaceId": "properties.workspaceId (an ARM id)",
        "storageAccountId": "properties.storageAccountId (an ARM id)", "resourceUri": "path parameter (an ARM id)"}
    for t in ("azure-native:monitor:DiagnosticSetting", "azure-native:monitor:SubscriptionDiagnosticSetting")
}  # fmt: skip

# Inputs the provider consumes itself or rewrites before the request (no body member of that shape).
PROVIDER_ONLY: dict[str, dict[str, str]] = {}

# Body members Azure requires that the plan may leave out because the provider or ARM fills them in.
FILLED: dict[str, set[str]] = {
    "*": {"location"},  # azure-native defaults `location` to the resource group's
}


def model_of(api: Api) -> Any:
    import importlib

    module, cls = api.model.split(":")
    return getattr(importlib.import_module(module), cls)
