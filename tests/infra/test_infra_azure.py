"""Azure stack: Key Vault key with rotation, hardened storage, workload identity federation, AKS with KMS,
spot GPU pool from zero, ACR, diagnostic settings to Log Analytics, consumption budget."""

from __future__ import annotations

import pytest
from infra_fixtures import Plan

from infra import plan as planner
from infra.azure import roles
from infra.azure.cluster import SPOT_TAINT
from infra.shape import POOL_LABEL, SERVICE_ACCOUNTS

CFG = planner.load_stack("azure-dev")
SUB, RG = planner.MOCK_AZURE_SUBSCRIPTION, f"rg-{CFG.name}"


@pytest.fixture(scope="module")
def az(plans: dict[str, Plan]) -> Plan:
    return plans["azure-dev"]


def test_vault_has_purge_protection_soft_delete_and_rbac(az: Plan) -> None:
    props = az.one("azure-native:keyvault:Vault")["inputs"]["properties"]
    assert (props["enablePurgeProtection"], props["enableSoftDelete"], props["enableRbacAuthorization"]) == (
        True,
        True,
        True,
    )
    key = az.one("azure-native:keyvault:Key")["inputs"]["properties"]
    assert key["kty"] == "RSA" and key["keySize"] >= 3072
    assert {"action": {"type": "rotate"}, "trigger": {"timeAfterCreate": "P90D"}} in key["rotationPolicy"][
        "lifetimeActions"
    ]


def test_storage_accounts_are_hardened_and_use_the_key(az: Plan) -> None:
    accounts = az.of_type("azure-native:storage:StorageAccount")
    assert len(accounts) == 2
    for a in accounts:
        i = a["inputs"]
        assert i["location"] == CFG.region
        assert (i["allowBlobPublicAccess"], i["allowSharedKeyAccess"], i["enableHttpsTrafficOnly"]) == (
            False,
            False,
            True,
        )
        assert i["minimumTlsVersion"] == "TLS1_2"
        assert i["encryption"]["keySource"] == "Microsoft.Keyvault"
        assert i["encryption"]["keyVaultProperties"]["keyName"] == "data"
        assert i["encryption"]["requireInfrastructureEncryption"] is True
    services = az.of_type("azure-native:storage:BlobServiceProperties")
    assert len(services) == 2 and all(s["inputs"]["isVersioningEnabled"] is True for s in services)
    containers = {
        c["inputs"]["containerName"]: c["inputs"]["publicAccess"]
        for c in az.of_type("azure-native:storage:BlobContainer")
    }
    assert containers == {
        "raw": "None",
        "splits": "None",
        "checkpoints": "None",
        "models": "None",
        "logs": "None",
    }
    rules = [
        r["name"]
        for p in az.of_type("azure-native:storage:ManagementPolicy")
        for r in p["inputs"]["policy"]["rules"]
    ]
    assert {"expire-noncurrent-versions", "expire-old-checkpoints", "expire-logs-after-retention"} <= set(
        rules
    )


def test_identities_federate_one_service_account_and_get_container_scoped_roles(az: Plan) -> None:
    subjects = {
        r["inputs"]["subject"] for r in az.of_type("azure-native:managedidentity:FederatedIdentityCredential")
    }
    assert subjects == {roles.federated_subject(sa.namespace, sa.name) for sa in SERVICE_ACCOUNTS.values()}
    scoped = {
        (
            r["name"].removeprefix(f"{CFG.name}-identities-"),
            r["inputs"]["scope"],
            r["inputs"]["roleDefinitionId"],
        )
        for r in az.of_type("azure-native:authorization:RoleAssignment")
        if r["name"].startswith(f"{CFG.name}-identities-")
        and r["name"].rsplit("-", 1)[1] in ("raw", "splits", "checkpoints", "models")
    }
    data = f"{CFG.org}mlp{CFG.stack.replace('-', '')}data"
    expected = set()
    for identity in SERVICE_ACCOUNTS:
        for a in roles.container_assignments(identity):
            role = planner.UNKNOWN if a.role == roles.WRITER_ROLE else roles.role_definition_id(SUB, a.role)
            expected.add((f"{identity}-{a.target}", roles.container_scope(SUB, RG, data, a.target), role))
    assert scoped == expected
    writer = az.one("azure-native:authorization:RoleDefinition")["inputs"]
    assert writer["permissions"] == [{"dataActions": list(roles.BLOB_WRITE_DATA_ACTIONS)}]
    sa = {
        r["inputs"]["metadata"]["name"]: r["inputs"]["metadata"]
        for r in az.of_type("kubernetes:core/v1:ServiceAccount")
    }
    assert set(sa["trainer"]["annotations"]) == {"azure.workload.identity/client-id"}
    pod_labels = az.one("kubernetes:apps/v1:Deployment")["inputs"]["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["azure.workload.identity/use"] == "true"


def test_aks_kms_network_policy_restricted_api_and_workload_identity(az: Plan) -> None:
    c = az.one("azure-native:containerservice:ManagedCluster")["inputs"]
    assert c["securityProfile"]["azureKeyVaultKms"]["enabled"] is True
    assert c["securityProfile"]["workloadIdentity"] == {"enabled": True}
    assert c["oidcIssuerProfile"] == {"enabled": True}
    assert c["networkProfile"]["networkPolicy"] == "cilium"
    assert c["apiServerAccessProfile"]["authorizedIPRanges"] == list(CFG.network.api_allowed_cidrs)
    assert c["disableLocalAccounts"] is True


def test_spot_gpu_pool_from_zero(az: Plan) -> None:
    gpu = az.one("azure-native:containerservice:AgentPool", "-gpu")["inputs"]
    assert (gpu["scaleSetPriority"], gpu["scaleSetEvictionPolicy"], gpu["spotMaxPrice"]) == (
        "Spot",
        "Delete",
        -1.0,
    )
    assert (gpu["enableAutoScaling"], gpu["minCount"], gpu["mode"]) == (True, 0.0, "User")
    assert gpu["gpuProfile"] == {"driver": "Install"}
    assert gpu["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert gpu["nodeLabels"] == {POOL_LABEL: "gpu"}
    out = az["outputs"]["pool_selectors"]["gpu"]["tolerations"]
    assert SPOT_TAINT in out  # AKS taints spot nodes itself; jobs must tolerate it


def test_registry_audit_and_budget(az: Plan) -> None:
    acr = az.one("azure-native:containerregistry:Registry")["inputs"]
    assert (acr["adminUserEnabled"], acr["anonymousPullEnabled"]) == (False, False)
    assert acr["encryption"]["status"] == "enabled"
    ws = az.one("azure-native:operationalinsights:Workspace")["inputs"]
    assert ws["retentionInDays"] >= 365
    settings = {
        r["name"].rsplit("-", 1)[1]: r["inputs"] for r in az.of_type("azure-native:monitor:DiagnosticSetting")
    }
    assert {log["category"] for log in settings["aks"]["logs"]} >= {"kube-audit", "kube-audit-admin"}
    assert {log["category"] for log in settings["blob"]["logs"]} == {
        "StorageRead",
        "StorageWrite",
        "StorageDelete",
    }
    budget = az.one("azure-native:consumption:Budget")["inputs"]
    assert budget["amount"] == CFG.budget.monthly_amount and budget["timeGrain"] == "Monthly"
    assert budget["scope"] == roles.resource_group_id(SUB, RG)


def test_update_mode_resolves_computed_identities() -> None:
    """`pulumi up` order: AKS issuer, kubelet and disk-encryption identities feed later resources."""
    p = Plan(planner.run(CFG, planner.stack_config("azure-dev"), preview=False))
    issuers = {
        r["inputs"]["issuer"] for r in p.of_type("azure-native:managedidentity:FederatedIdentityCredential")
    }
    assert issuers == {f"https://oidc.example/{CFG.name}-aks/"}
    cluster = p.one("azure-native:containerservice:ManagedCluster")["inputs"]
    assert cluster["diskEncryptionSetID"] == f"{CFG.name}-aks-disk-encryption-id"
    des = p.one("azure-native:compute:DiskEncryptionSet")["inputs"]
    assert des["activeKey"]["keyUrl"] == f"https://vault.example/keys/{CFG.name}-key-key/1"
