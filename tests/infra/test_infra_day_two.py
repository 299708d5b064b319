"""Day two on every cloud: resource options for replace/destroy, egress for the server's cloud identity,
Prometheus storage, and the outputs a user reads after `up`. Expected values are written out here (from
the providers' behaviour and documentation), not recomputed with the program's own tables."""

from __future__ import annotations

import pytest
from infra_fixtures import STACKS, Plan

from infra import plan as planner

# Resources whose replacement must delete first, by name suffix (a fixed physical name, or one per parent).
DELETE_FIRST = {
    "dev": [
        ("aws:s3/bucket:Bucket", "mlp-dev-buckets-raw"),
        ("aws:s3/bucketPolicy:BucketPolicy", "mlp-dev-buckets-raw-policy"),
        ("aws:s3/bucketVersioning:BucketVersioning", "mlp-dev-buckets-models-versioning"),
        ("aws:eks/cluster:Cluster", "mlp-dev-eks"),
        ("aws:eks/addon:Addon", "mlp-dev-eks-vpc-cni"),
        ("aws:iam/role:Role", "mlp-dev-identities-trainer"),
        ("aws:kms/alias:Alias", "mlp-dev-key-alias"),
        ("aws:ecr/repository:Repository", "mlp-dev-registry-serving"),
        ("aws:cloudwatch/logGroup:LogGroup", "mlp-dev-eks-control-plane-logs"),
        ("aws:eks/accessEntry:AccessEntry", "mlp-dev-eks-access-deployer"),
        ("kubernetes:helm.sh/v3:Release", "mlp-dev-addons-prometheus"),
    ],
    "gcp-dev": [
        ("gcp:storage/bucket:Bucket", "mlp-gcp-dev-buckets-raw"),
        ("gcp:container/cluster:Cluster", "mlp-gcp-dev-gke"),
        ("gcp:container/nodePool:NodePool", "mlp-gcp-dev-gke-gpu"),
        ("gcp:serviceaccount/account:Account", "mlp-gcp-dev-identities-trainer"),
        ("gcp:storage/bucketIAMMember:BucketIAMMember", "mlp-gcp-dev-identities-trainer-raw"),
        ("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember", "mlp-gcp-dev-key-storage-agent"),
    ],
    "azure-dev": [
        ("azure-native:storage:StorageAccount", "mlp-azure-dev-storage-data"),
        ("azure-native:containerservice:ManagedCluster", "mlp-azure-dev-aks"),
        ("azure-native:containerservice:AgentPool", "mlp-azure-dev-aks-gpu"),
        ("azure-native:keyvault:Vault", "mlp-azure-dev-key-vault"),
        ("azure-native:authorization:RoleAssignment", "mlp-azure-dev-identities-trainer-raw"),
        ("azure-native:managedidentity:UserAssignedIdentity", "mlp-azure-dev-identities-server"),
    ],
}
# Autonamed or additive resources keep Pulumi's default (create the replacement first: no downtime).
CREATE_FIRST = {
    "dev": [
        ("aws:ec2/launchTemplate:LaunchTemplate", "mlp-dev-eks-gpu-template"),
        ("aws:ec2/vpc:Vpc", "mlp-dev-network-vpc"),
    ],
    "gcp-dev": [
        ("gcp:monitoring/notificationChannel:NotificationChannel", "mlp-gcp-dev-audit-budget-email-0")
    ],
    "azure-dev": [],
}
# Where the data and keys are, and the settings that guard them: kept by the cloud if a prod stack is destroyed.
RETAINED = {
    "prod": {
        *(
            ("aws:s3/bucket:Bucket", f"mlp-prod-buckets-{b}")
            for b in ("raw", "splits", "checkpoints", "models", "logs")
        ),
        # ... and what keeps each bucket's data safe (the logs bucket logs nowhere: it is the log target).
        *(
            (f"aws:s3/{token}", f"mlp-prod-buckets-{b}-{suffix}")
            for b in ("raw", "splits", "checkpoints", "models", "logs")
            for token, suffix in (
                ("bucketVersioning:BucketVersioning", "versioning"),
                ("bucketLifecycleConfiguration:BucketLifecycleConfiguration", "lifecycle"),
                (
                    "bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                    "encryption",
                ),
                ("bucketPublicAccessBlock:BucketPublicAccessBlock", "public-access"),
                ("bucketOwnershipControls:BucketOwnershipControls", "ownership"),
                ("bucketPolicy:BucketPolicy", "policy"),
                ("bucketLogging:BucketLogging", "logging"),
            )
            if (b, suffix) != ("logs", "logging")
        ),
        ("aws:kms/key:Key", "mlp-prod-key-key"),
        ("aws:ecr/repository:Repository", "mlp-prod-registry-training"),
        ("aws:ecr/repository:Repository", "mlp-prod-registry-serving"),
        ("aws:ecr/lifecyclePolicy:LifecyclePolicy", "mlp-prod-registry-training-lifecycle"),
        ("aws:ecr/lifecyclePolicy:LifecyclePolicy", "mlp-prod-registry-serving-lifecycle"),
        ("aws:cloudwatch/logGroup:LogGroup", "mlp-prod-eks-control-plane-logs"),
        # Account-wide: other stacks in the account use it.
        ("aws:iam/serviceLinkedRole:ServiceLinkedRole", "mlp-prod-key-autoscaling-role"),
    },
    "dev": {("aws:iam/serviceLinkedRole:ServiceLinkedRole", "mlp-dev-key-autoscaling-role")},
    "staging": {("aws:iam/serviceLinkedRole:ServiceLinkedRole", "mlp-staging-key-autoscaling-role")},
    "gcp-dev": set(),
    "azure-dev": set(),
}
# Fields a controller owns after creation.
IGNORED = {
    "dev": {("aws:eks/nodeGroup:NodeGroup", "mlp-dev-eks-gpu"): ["scalingConfig.desiredSize"]},
    "gcp-dev": {("gcp:container/nodePool:NodePool", "mlp-gcp-dev-gke-gpu"): ["initialNodeCount"]},
    "azure-dev": {
        ("azure-native:containerservice:ManagedCluster", "mlp-azure-dev-aks"): ["agentPoolProfiles[0].count"],
        ("azure-native:containerservice:AgentPool", "mlp-azure-dev-aks-gpu"): ["count"],
        ("azure-native:consumption:Budget", "mlp-azure-dev-audit-budget"): ["timePeriod.startDate"],
    },
}


@pytest.mark.parametrize("stack", ["dev", "gcp-dev", "azure-dev"])
def test_fixed_names_delete_before_replace_and_autonamed_do_not(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    for token, name in DELETE_FIRST[stack]:
        assert p.named(name, token)["deleteBeforeReplace"] is True, name
    for token, name in CREATE_FIRST[stack]:
        assert p.named(name, token)["deleteBeforeReplace"] is False, name


@pytest.mark.parametrize("stack", STACKS)
def test_only_data_and_keys_are_retained_and_only_in_prod(plans: dict[str, Plan], stack: str) -> None:
    retained = {(r["type"], r["name"]) for r in plans[stack].resources if r["retainOnDelete"]}
    assert retained == RETAINED[stack]


@pytest.mark.parametrize("stack", ["dev", "gcp-dev", "azure-dev"])
def test_controller_owned_fields_are_ignored(plans: dict[str, Plan], stack: str) -> None:
    for (token, name), fields in IGNORED[stack].items():
        assert plans[stack].named(name, token)["ignoreChanges"] == fields
    deployment = plans[stack].one("kubernetes:apps/v1:Deployment")
    assert deployment["ignoreChanges"] == ["spec.replicas"]  # the HPA owns it


# The server's cloud identity: where each cloud serves pod credentials (provider documentation).
IDENTITY_ENDPOINTS = {
    "aws": [("169.254.170.23/32", [("TCP", 80.0)])],  # EKS Pod Identity agent
    "gcp": [
        ("169.254.169.254/32", [("TCP", 80.0)]),
        ("169.254.169.252/32", [("TCP", 988.0)]),
    ],  # GKE metadata server
    "azure": [],  # Entra ID's token endpoint is public HTTPS (login.microsoftonline.com)
}


@pytest.mark.parametrize("stack", STACKS)
def test_server_egress_allows_dns_its_identity_endpoint_and_public_https_only(
    plans: dict[str, Plan], stack: str
) -> None:
    p = plans[stack]
    (policy,) = [
        r["inputs"]["spec"]
        for r in p.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if r["inputs"]["metadata"]["name"] == "triton"
    ]
    dns, *rest = policy["egress"]
    assert {(x["protocol"], x["port"]) for x in dns["ports"]} == {("UDP", 53.0), ("TCP", 53.0)}
    blocks = [
        (rule["to"][0]["ipBlock"], [(x["protocol"], x["port"]) for x in rule["ports"]]) for rule in rest
    ]
    identity = [(b["cidr"], ports) for b, ports in blocks if b["cidr"] != "0.0.0.0/0"]
    assert identity == IDENTITY_ENDPOINTS[p["cloud"]]
    (https,) = [(b, ports) for b, ports in blocks if b["cidr"] == "0.0.0.0/0"]
    assert https[1] == [("TCP", 443.0)]
    # No path to pods, nodes, the VPC or instance metadata through the HTTPS rule.
    assert set(https[0]["except"]) >= {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}


@pytest.mark.parametrize(
    ("stack", "volume_gi"),
    # (system + serving + gpu max nodes) x 1500 + maxReplicas x 300 + 15000 series, every 15 s, 15 days,
    # 2 bytes per sample, x1.5: dev 8 nodes -> 6.7 GiB (the 8Gi floor), prod 18 nodes -> 10.9 -> 11Gi.
    [("dev", 8), ("prod", 11), ("gcp-dev", 8), ("azure-dev", 8)],
)
def test_prometheus_keeps_15_days_on_a_volume_sized_for_them(
    plans: dict[str, Plan], stack: str, volume_gi: int
) -> None:
    server = plans[stack].one("kubernetes:helm.sh/v3:Release", "-prometheus")["inputs"]["values"]["server"]
    assert server["retention"] == "15d"
    assert server["persistentVolume"] == {"enabled": True, "size": f"{volume_gi}Gi"}
    # Deletion starts before the volume is full, whatever the series estimate.
    assert server["retentionSize"] == f"{int(volume_gi * 2**30 * 0.8 / 1e9)}GB"


ENDPOINT_FORMS = {
    "aws": "https://mlp-dev-eks.eks.example",
    "gcp": "https://203.0.113.10",
    "azure": "https://mlp-azure-dev-aks-dns.hcp.spaincentral.azmk8s.io:443",
}


@pytest.mark.parametrize("stack", ["dev", "gcp-dev", "azure-dev"])
def test_outputs_after_up_name_endpoint_principals_keys_and_registry(
    updates: dict[str, Plan], stack: str
) -> None:
    out, cloud = updates[stack]["outputs"], updates[stack]["cloud"]
    assert out["cluster_endpoint"] == ENDPOINT_FORMS[cloud]
    assert set(out["identity_principals"]) == {"trainer", "server", "ci-deployer", "monitor"}
    principal = out["identity_principals"]["trainer"]
    assert {
        "aws": principal == "arn:mock:aws:iam/role:Role:mlp-dev-identities-trainer",
        "gcp": principal == "mlp-gcp-dev-trainer@acme-ml-platform-dev.iam.gserviceaccount.com",
        "azure": principal == "mlp-azure-dev-identities-trainer-client",
    }[cloud], principal
    assert (
        out["registry"]
        == {
            "aws": "123456789012.dkr.ecr.eu-south-2.amazonaws.com",
            "gcp": "europe-southwest1-docker.pkg.dev",
            "azure": "acmemlpazuredevacr.azurecr.io",
        }[cloud]
    )
    assert "environment" in out["key_ids"] and planner.UNKNOWN not in str(out["key_ids"])
    if cloud == "aws":
        assert out["oidc_issuer"] == "https://oidc.eks.example/id/mlp-dev-eks"
    assert out["serving_endpoint"]["http"] == "http://triton.serving.svc.cluster.local:8000"


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_pool_output_lists_every_taint_its_nodes_carry(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    taints = plans[stack]["outputs"]["gpu_pool"]["taints"]
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    spot = {"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"}
    assert taints == ([gpu, spot] if p["cloud"] == "azure" else [gpu])
    tolerations = p["outputs"]["pool_selectors"]["gpu"]["tolerations"]
    assert tolerations == [{**t, "operator": "Equal"} for t in taints]
    assert p["outputs"]["gpu_pool"]["spot_drain"]


def test_every_azure_resource_given_its_name_is_deleted_before_it_is_replaced(plans: dict[str, Plan]) -> None:
    """ARM creates a resource by a PUT on its name: a replacement created first under the same name is the same
    resource, updated in place, and the delete of the "old" one that follows deletes it (the stack is left
    without it). So a resource whose name the program gives must be deleted first, whatever its type."""
    from infra.azure_names import AZURE_NAME_INPUTS

    named = 0
    for r in plans["azure-dev"].iter_custom():
        if not r["type"].startswith("azure-native:"):
            continue
        assert r["type"] in AZURE_NAME_INPUTS, (
            f"add {r['type']}'s name input to infra/azure_names.AZURE_NAME_INPUTS"
        )
        if isinstance(r["inputs"].get(AZURE_NAME_INPUTS[r["type"]][0]), str):
            named += 1
            assert r["deleteBeforeReplace"] is True, (r["type"], r["name"])
    assert named > 30


def test_a_new_azure_type_is_deleted_before_replace_once_its_name_input_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mocks' name table and the option's identity table were two lists of the same fact: a type added to one
    only was named by the mocks but replaced create-first (ARM's PUT then the delete of the "old" one lose it)."""
    from infra import lifecycle, plan_mocks

    token = "azure-native:cache:RedisEnterprise"
    monkeypatch.setitem(plan_mocks.AZURE_NAME_INPUTS, token, ("clusterName", plan_mocks.SUFFIXED))
    named = lifecycle.options(token, {"cluster_name": "redis-mlp-dev"}, prod=False)
    assert named is not None and named.delete_before_replace is True
    assert lifecycle.options(token, {"cluster_name": None}, prod=False) is None


@pytest.mark.parametrize("stack", ["dev", "gcp-dev"])
def test_every_named_resource_and_iam_binding_is_deleted_before_it_is_replaced(
    plans: dict[str, Plan], stack: str
) -> None:
    """A replacement created first under a fixed name collides with the old one (AWS and GCP answer "already
    exists"); an IAM binding created first is the same binding, which the delete of the old one then removes. So
    the option is judged by what the program sends, not by the table that sets it (infra/lifecycle.py)."""
    judged = 0
    for r in plans[stack].iter_custom():
        if r["type"].startswith("pulumi:providers:"):
            continue
        binding = r["type"].endswith(("IAMMember", "IamMember"))
        if binding or isinstance(r["inputs"].get("name"), str):
            judged += 1
            assert r["deleteBeforeReplace"] is True, (r["type"], r["name"])
    assert judged > 20
