"""The compliant Azure fixture stack (storage account, AKS and a spot GPU pool, Key Vault, ACR, budget)."""

from __future__ import annotations

from typing import Any

from policy_fixtures_base import PROJECT, TAGS, UNKNOWN, res, urn


def azure_stack(stack: str = "azure-dev") -> dict[str, Any]:
    prov_urn = urn(stack, "pulumi:providers:azure-native", "azure-eu")
    p = {"provider": prov_urn + "::" + UNKNOWN}
    tags = dict(TAGS)
    rg = res(
        stack, "azure-native:resources:ResourceGroup", "rg", {"location": "spaincentral", "tags": tags}, **p
    )
    account = res(
        stack,
        "azure-native:storage:StorageAccount",
        "data",
        {
            "accountName": "eumldevdata",
            "resourceGroupName": UNKNOWN,
            "location": "spaincentral",
            "kind": "StorageV2",
            "sku": {"name": "Standard_ZRS"},
            "allowBlobPublicAccess": False,
            "publicNetworkAccess": "Disabled",
            "minimumTlsVersion": "TLS1_2",
            "enableHttpsTrafficOnly": True,
            "encryption": {
                "keySource": "Microsoft.Keyvault",
                "keyVaultProperties": {"keyName": "data", "keyVaultUri": "https://kv.vault.azure.net"},
            },
            "tags": tags,
        },
        dependencies=[rg["urn"]],
        **p,
    )
    cluster = res(
        stack,
        "azure-native:containerservice:ManagedCluster",
        "cluster",
        {
            "resourceGroupName": UNKNOWN,
            "location": "spaincentral",
            "apiServerAccessProfile": {"authorizedIPRanges": ["203.0.113.0/24"]},
            "diskEncryptionSetID": UNKNOWN,
            "securityProfile": {"azureKeyVaultKms": {"enabled": True, "keyId": UNKNOWN}},
            "networkProfile": {"networkPlugin": "azure", "networkPolicy": "cilium"},
            # Entra ID only, no admin group, no local clusterAdmin credential (k8s-cluster-admin-grants).
            "aadProfile": {"managed": True, "enableAzureRBAC": True},
            "disableLocalAccounts": True,
            "tags": tags,
        },
        # The key references come from the stack's key vault key (unknown at preview, the edge is known).
        dependencies=[rg["urn"], urn(stack, "azure-native:keyvault:Key", "data")],
        **p,
    )
    resources = [
        res(stack, "pulumi:providers:azure-native", "azure-eu", {"location": "spaincentral"}),
        rg,
        account,
        res(
            stack,
            "azure-native:storage:BlobServiceProperties",
            "data-blob",
            {"accountName": "eumldevdata", "resourceGroupName": UNKNOWN, "isVersioningEnabled": True},
            dependencies=[account["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:storage:ManagementPolicy",
            "data-lifecycle",
            {"accountName": "eumldevdata", "resourceGroupName": UNKNOWN, "policy": {"rules": []}},
            dependencies=[account["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:storage:BlobContainer",
            "checkpoints",
            {"accountName": "eumldevdata", "containerName": "checkpoints", "publicAccess": "None"},
            dependencies=[account["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:monitor:DiagnosticSetting",
            "data-diag",
            {"resourceUri": UNKNOWN, "logs": [{"categoryGroup": "allLogs", "enabled": True}]},
            dependencies=[account["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:keyvault:Vault",
            "kv",
            {
                "location": "spaincentral",
                "resourceGroupName": UNKNOWN,
                "properties": {
                    "enablePurgeProtection": True,
                    "enableSoftDelete": True,
                    "publicNetworkAccess": "Disabled",
                },
                "tags": tags,
            },
            **p,
        ),
        res(
            stack,
            "azure-native:keyvault:Key",
            "data",
            {
                "properties": {
                    "rotationPolicy": {
                        "lifetimeActions": [
                            {"action": {"type": "rotate"}, "trigger": {"timeAfterCreate": "P90D"}}
                        ]
                    }
                }
            },
            **p,
        ),
        cluster,
        res(
            stack,
            "azure-native:monitor:DiagnosticSetting",
            "cluster-audit",
            {"resourceUri": UNKNOWN, "logs": [{"category": "kube-audit-admin", "enabled": True}]},
            dependencies=[cluster["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:containerservice:AgentPool",
            "gpuspot",
            {
                "vmSize": "Standard_NC4as_T4_v3",
                "scaleSetPriority": "Spot",
                "enableAutoScaling": True,
                "minCount": 0.0,
                "maxCount": 4.0,
                "nodeTaints": ["nvidia.com/gpu=true:NoSchedule"],
                "tags": tags,
            },
            dependencies=[cluster["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:containerregistry:Registry",
            "acr",
            {
                "location": "spaincentral",
                "sku": {"name": "Premium"},
                "adminUserEnabled": False,
                "anonymousPullEnabled": False,
                "publicNetworkAccess": "Disabled",
                "encryption": {"status": "enabled", "keyVaultProperties": {"keyIdentifier": UNKNOWN}},
                "tags": tags,
            },
            dependencies=[urn(stack, "azure-native:keyvault:Key", "data")],
            **p,
        ),
        res(
            stack,
            "azure-native:authorization:RoleAssignment",
            "acr-pull",
            {
                "principalId": UNKNOWN,
                "roleDefinitionId": "/subscriptions/0000/providers/Microsoft.Authorization/roleDefinitions/7f951dda-4ed3-4680-a7ca-43fe172d538d",
                "scope": UNKNOWN,
            },
            **p,
        ),
        res(
            stack,
            "azure-native:operationalinsights:Workspace",
            "logs",
            {"location": "spaincentral", "retentionInDays": 365.0, "tags": tags},
            **p,
        ),
        res(
            stack,
            "azure-native:consumption:Budget",
            "monthly",
            {
                "scope": "/subscriptions/0000",
                "amount": 500.0,
                "category": "Cost",
                "timeGrain": "Monthly",
                "notifications": {
                    "actual80": {
                        "enabled": True,
                        "operator": "GreaterThan",
                        "threshold": 80.0,
                        "contactEmails": ["ml@example.eu"],
                    }
                },
            },
            **p,
        ),
    ]
    return {
        "stack": stack,
        "cloud": "azure",
        "project": PROJECT,
        "environment": "dev",
        "region": "spaincentral",
        "resources": resources,
        "outputs": {},
    }
