"""Which input names each azure-native resource, and what the provider does when it is unset.

One table, read by the program (infra/lifecycle.py: a resource given its name is deleted before it is replaced) and
by the offline plan's mocks (infra/plan_mocks.py: the `name` output a created resource gets).
"""

from __future__ import annotations

# azure-native's name input per resource type: the last path parameter of the type's REST path. ARM returns
# it as the resource's `name` output, which other resources take as their parent's name (a key's `vaultName`,
# a pool's cluster `resourceName`). Unset, the provider auto-names it: a top-level resource gets the logical
# name plus 8 random hex digits, a child resource the logical name as it is (pulumi-azure-native#519), and
# role assignments and definitions a random GUID (ARM takes nothing else; pulumi-azure-native#625). The
# program names every resource but its role assignments, so only those take the unset branch today.
SUFFIXED, AS_IS, GUID = "suffixed", "as-is", "guid"
# plan_ids.AZURE_IDS has the same types but another fact (the ARM id format, whose last segment is the `name`
# output): it cannot be derived from this table, nor this one from it.
AZURE_NAME_INPUTS: dict[str, tuple[str, str]] = {
    "azure-native:resources:ResourceGroup": ("resourceGroupName", SUFFIXED),
    "azure-native:storage:StorageAccount": ("accountName", SUFFIXED),
    "azure-native:storage:BlobServiceProperties": ("blobServicesName", AS_IS),
    "azure-native:storage:BlobContainer": ("containerName", AS_IS),
    "azure-native:storage:ManagementPolicy": ("managementPolicyName", AS_IS),
    "azure-native:keyvault:Vault": ("vaultName", SUFFIXED),
    "azure-native:keyvault:Key": ("keyName", AS_IS),
    "azure-native:containerregistry:Registry": ("registryName", SUFFIXED),
    "azure-native:containerservice:ManagedCluster": ("resourceName", SUFFIXED),
    "azure-native:containerservice:AgentPool": ("agentPoolName", AS_IS),
    "azure-native:compute:DiskEncryptionSet": ("diskEncryptionSetName", SUFFIXED),
    "azure-native:managedidentity:UserAssignedIdentity": ("resourceName", SUFFIXED),
    "azure-native:managedidentity:FederatedIdentityCredential": (
        "federatedIdentityCredentialResourceName",
        AS_IS,
    ),
    "azure-native:authorization:RoleAssignment": ("roleAssignmentName", GUID),
    "azure-native:authorization:RoleDefinition": ("roleDefinitionId", GUID),
    "azure-native:consumption:Budget": ("budgetName", SUFFIXED),
    "azure-native:operationalinsights:Workspace": ("workspaceName", SUFFIXED),
    "azure-native:monitor:ActionGroup": ("actionGroupName", SUFFIXED),
    "azure-native:monitor:MetricAlert": ("ruleName", SUFFIXED),
    "azure-native:monitor:DiagnosticSetting": ("name", AS_IS),
    "azure-native:monitor:SubscriptionDiagnosticSetting": ("name", SUFFIXED),
    "azure-native:network:VirtualNetwork": ("virtualNetworkName", SUFFIXED),
    "azure-native:network:Subnet": ("subnetName", AS_IS),
    "azure-native:network:NatGateway": ("natGatewayName", SUFFIXED),
    "azure-native:network:PublicIPAddress": ("publicIpAddressName", SUFFIXED),
}
