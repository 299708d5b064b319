"""Azure stack: Key Vault key with rotation, hardened storage, workload identity federation, AKS with KMS,
spot GPU pool from zero, ACR, diagnostic settings to Log Analytics, consumption budget."""

from __future__ import annotations

import datetime
import json
import re

import pytest
from infra_fixtures import Plan

from infra import plan as planner
from infra.shape import POOL_LABEL

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
    keys = {
        r["inputs"]["keyName"]: r["inputs"]["properties"] for r in az.of_type("azure-native:keyvault:Key")
    }
    assert set(keys) == {"data", "kubernetes-secrets"}
    for key in keys.values():
        assert key["kty"] == "RSA" and key["keySize"] >= 3072
        assert {"action": {"type": "rotate"}, "trigger": {"timeAfterCreate": "P90D"}} in key[
            "rotationPolicy"
        ]["lifetimeActions"]
    assert keys["data"]["rotationPolicy"]["attributes"] == {"expiryTime": "P1Y"}
    # AKS's KMS plugin holds one key version: that key's versions must not expire after rotation.
    assert "attributes" not in keys["kubernetes-secrets"]["rotationPolicy"]


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
    assert subjects == {
        "system:serviceaccount:training:trainer",
        "system:serviceaccount:serving:triton",
        "system:serviceaccount:ci:ci-deployer",
        "system:serviceaccount:drift:monitor",
        # The budget cost job's own identity (its role: tests/infra/test_infra_budget_job.py).
        "system:serviceaccount:cost:budget",
    }
    scoped = {
        (
            r["name"].removeprefix(f"{CFG.name}-identities-"),
            r["inputs"]["scope"].split("/containers/")[1],
            r["inputs"]["roleDefinitionId"].rsplit("/", 1)[-1],
        )
        for r in az.of_type("azure-native:authorization:RoleAssignment")
        if "/containers/" in str(r["inputs"]["scope"]) and "condition" not in r["inputs"]
    }
    reader, contributor = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1", "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
    assert scoped == {
        ("trainer-raw", "raw", reader),
        ("trainer-splits", "splits", reader),
        ("trainer-checkpoints", "checkpoints", contributor),
        # The custom write-only role: its id is only known once it exists.
        ("trainer-models", "models", planner.UNKNOWN),
        ("server-models", "models", reader),
    }
    data_account = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Storage/storageAccounts/acmemlpazuredevdata"
    assert all(
        r["inputs"]["scope"].startswith(data_account + "/blobServices/default/containers/")
        for r in az.of_type("azure-native:authorization:RoleAssignment")
        if "/containers/" in str(r["inputs"]["scope"]) and "condition" not in r["inputs"]
    )
    writer = az.one("azure-native:authorization:RoleDefinition")["inputs"]
    assert writer["permissions"] == [
        {
            "dataActions": [
                "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write",
                "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/add/action",
            ]
        }
    ]
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
    # The NAT gateway's address (known once it exists) joins the configured ranges: nodes leave through it.
    assert c["apiServerAccessProfile"]["authorizedIPRanges"] == ["198.51.100.0/24", planner.UNKNOWN]
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
    # AKS taints spot nodes itself; jobs must tolerate it.
    assert {
        "key": "kubernetes.azure.com/scalesetpriority",
        "operator": "Equal",
        "value": "spot",
        "effect": "NoSchedule",
    } in out


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
    assert budget["scope"] == f"/subscriptions/{SUB}/resourceGroups/{RG}"


def test_update_mode_resolves_computed_identities(updates: dict[str, Plan]) -> None:
    """`pulumi up` order: AKS issuer, kubelet and disk-encryption identities feed later resources."""
    p = updates["azure-dev"]
    issuers = {
        r["inputs"]["issuer"] for r in p.of_type("azure-native:managedidentity:FederatedIdentityCredential")
    }
    assert issuers == {f"https://oidc.example/{CFG.name}-aks/"}
    cluster = p.one("azure-native:containerservice:ManagedCluster")["inputs"]
    # ARM ids and Key Vault URLs in the providers' formats (infra/plan_ids.py), not placeholders.
    des = p.one("azure-native:compute:DiskEncryptionSet")["inputs"]
    assert cluster["diskEncryptionSetID"] == (
        f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/diskEncryptionSets/"
        f"{des['diskEncryptionSetName']}"
    )
    vault = p.one("azure-native:keyvault:Vault")["inputs"]["vaultName"]
    assert des["activeKey"]["sourceVault"]["id"] == (
        f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.KeyVault/vaults/{vault}"
    )
    # A disk encryption set takes a key by version (Key Vault's object identifier: 32 hex digits).
    assert re.fullmatch(
        rf"https://{vault}\.vault\.azure\.net/keys/data/[0-9a-f]{{32}}", des["activeKey"]["keyUrl"]
    )
    # Kubernetes secrets: the key of their own, by version (what AKS's KMS plugin requires).
    kms = cluster["securityProfile"]["azureKeyVaultKms"]
    assert re.fullmatch(
        rf"https://{vault}\.vault\.azure\.net/keys/kubernetes-secrets/[0-9a-f]{{32}}", kms["keyId"]
    )
    assert cluster["apiServerAccessProfile"]["authorizedIPRanges"] == ["198.51.100.0/24", "203.0.113.7/32"]


def test_the_deployer_gets_a_kubernetes_role_before_any_kubernetes_resource(az: Plan) -> None:
    """Azure RBAC for Kubernetes authorizes every call: without a role the first Kubernetes resource is 403."""
    (grant,) = [
        r
        for r in az.of_type("azure-native:authorization:RoleAssignment")
        if r["name"].endswith("-deployer-rbac-cluster-admin")
    ]
    assert grant["inputs"]["principalId"] == planner.MOCK_AZURE_OBJECT  # whoever runs `pulumi up`
    # "Azure Kubernetes Service RBAC Cluster Admin" (built-in role id), on the cluster.
    assert grant["inputs"]["roleDefinitionId"] == (
        f"/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
    )
    assert grant["inputs"]["scope"] == planner.UNKNOWN
    assert az.one("azure-native:containerservice:ManagedCluster")["urn"] in grant["dependencies"]
    (k8s,) = az.of_type("pulumi:providers:kubernetes")
    assert grant["urn"] in k8s["dependencies"]


AKS_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: aks-x
  cluster: {certificate-authority-data: Q0E=, server: "https://aks-x-dns.hcp.spaincentral.azmk8s.io:443"}
contexts:
- name: aks-x
  context: {cluster: aks-x, user: clusterUser_rg_aks-x}
current-context: aks-x
users:
- name: clusterUser_rg_aks-x
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: kubelogin
      args: [get-token, --environment, AzurePublicCloud, --server-id, 6dae42f8-4368-4678-94ff-3960e28e3630,
             --client-id, 80faf920-1908-4b52-b5ef-a8e7bedfc67a, --tenant-id, 11111111-2222-3333-4444-555555555555,
             --login, devicecode]
"""


@pytest.mark.parametrize(
    ("login", "args"),
    [
        (
            "azurecli",
            ["get-token", "--login", "azurecli", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630"],
        ),
        (
            "workloadidentity",
            [
                *(
                    "get-token",
                    "--login",
                    "workloadidentity",
                    "--server-id",
                    "6dae42f8-4368-4678-94ff-3960e28e3630",
                ),
                *("--tenant-id", "11111111-2222-3333-4444-555555555555"),
            ],
        ),
    ],
)
def test_kubeconfig_never_asks_for_a_device_code(login: str, args: list[str]) -> None:
    from infra.k8s.kubeconfig import aks_kubeconfig

    doc = json.loads(aks_kubeconfig(AKS_KUBECONFIG, login))
    (user,) = doc["users"]
    assert user["user"]["exec"]["command"] == "kubelogin"
    assert user["user"]["exec"]["args"] == args
    assert doc["clusters"][0]["cluster"] == {
        "server": "https://aks-x-dns.hcp.spaincentral.azmk8s.io:443",
        "certificate-authority-data": "Q0E=",
    }


def test_the_program_rewrites_what_aks_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, str]] = []
    import infra.azure.cluster as cluster
    from infra.k8s.kubeconfig import aks_kubeconfig

    def spy(raw: str, login: str) -> str:
        seen.append((raw, login))
        return aks_kubeconfig(raw, login)

    monkeypatch.setattr(cluster, "aks_kubeconfig", spy)
    planner.run(CFG, planner.stack_config("azure-dev"), preview=False)
    ((raw, login),) = seen
    assert login == "azurecli" and "--login, devicecode" in raw


def test_budget_starts_this_month_and_keeps_its_start(az: Plan) -> None:
    budget = az.one("azure-native:consumption:Budget")
    today = datetime.datetime.now(datetime.UTC).date()
    assert budget["inputs"]["timePeriod"]["startDate"] == f"{today:%Y-%m}-01T00:00:00Z"
    assert budget["ignoreChanges"] == ["timePeriod.startDate"]


def test_subscription_activity_log_goes_to_the_workspace(az: Plan) -> None:
    (setting,) = az.of_type("azure-native:monitor:SubscriptionDiagnosticSetting")
    categories = {log["category"] for log in setting["inputs"]["logs"] if log["enabled"]}
    assert categories >= {"Administrative", "Security", "Policy", "Alert"}
    assert az.one("azure-native:operationalinsights:Workspace")["urn"] in setting["dependencies"]


# --- AKS's node resource group: MC_<resource group>_<cluster>_<location>, at most 80 characters ---------------
def test_a_stack_name_that_makes_the_node_resource_group_too_long_is_refused_at_preview(az: Plan) -> None:
    """Without `nodeResourceGroup`, AKS puts the nodes in `MC_<resource group>_<cluster>_<location>` and refuses
    a create whose name is longer than 80 (InvalidParameter "The length of the node resource group name is too
    long. The maximum length is 80 and the length of the value provided is 89" for
    MC_app-tucdlvurpmwf-sandbox-westeurope_aks-app-tucdlvurpmwf-sandbox-westeurope_westeurope, 89 characters:
    Azure-Terraform/terraform-azurerm-kubernetes#33; 82 in Azure/aad-pod-identity#810). Hyphens do not count
    towards the storage account names' 24, so the config alone admits such a stack; AKS would refuse it after
    the vault, accounts and registry exist."""
    from infra import config

    stack = "a-b-c-d-e-f-g-h-i-j-k-l-m"  # MC_rg-mlp-<25>_aks-mlp-<25>_spaincentral: 82 characters
    assert len(f"MC_rg-mlp-{stack}_aks-mlp-{stack}_spaincentral") == 82
    cfg = config.parse(config.project_keys(planner.stack_config("azure-dev")), stack=stack)
    with pytest.raises(config.ConfigError, match=r"stack: .*82 characters.*maximum length is 80"):
        planner.run(cfg, planner.stack_config("azure-dev"))
    # 24 characters is 80 exactly and passes; deployed clusters keep AKS's default name (setting
    # `nodeResourceGroup` on an existing cluster replaces it).
    longest = config.parse(
        config.project_keys(planner.stack_config("azure-dev")), stack="a-b-c-d-e-f-g-h-i-j-k-lm"
    )
    assert (
        "nodeResourceGroup"
        not in Plan(planner.run(longest, {})).one("azure-native:containerservice:ManagedCluster")["inputs"]
    )
    assert "nodeResourceGroup" not in az.one("azure-native:containerservice:ManagedCluster")["inputs"]
