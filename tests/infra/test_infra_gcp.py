"""GCP stack: CMEK everywhere with the one key, enforced public-access prevention, Workload Identity
bindings on single buckets, private GKE with a spot GPU pool from zero, audit config and budget."""

from __future__ import annotations

import pytest
from infra_fixtures import Plan

from infra import plan as planner
from infra.naming import global_name
from infra.shape import BUCKETS, GPU_TAINT_KEY, POOL_LABEL


@pytest.fixture(scope="module")
def gcp(plans: dict[str, Plan]) -> Plan:
    return plans["gcp-dev"]


CFG = planner.load_stack("gcp-dev")
KEY_NAME = f"projects/{CFG.gcp_project}/locations/{CFG.region}/keyRings/{CFG.name}/cryptoKeys/data"


def test_key_ring_and_key_live_in_the_buckets_region_and_dev_can_be_destroyed(gcp: Plan) -> None:
    ring = gcp.one("gcp:kms/keyRing:KeyRing")
    assert (ring["inputs"]["location"], ring["inputs"]["name"]) == (CFG.region, CFG.name)
    key = gcp.one("gcp:kms/cryptoKey:CryptoKey")
    assert key["inputs"]["rotationPeriod"] == f"{90 * 86400}s"
    assert ring["urn"] in key["dependencies"]
    # `protect` outside prod would make `pulumi destroy` of this dev stack fail (GCP keeps rings anyway).
    assert (ring["protect"], key["protect"]) == (False, False)
    assert {r["inputs"]["role"] for r in gcp.of_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")} == {
        "roles/cloudkms.cryptoKeyEncrypterDecrypter"
    }


def test_service_agents_come_from_the_provider_not_from_spelled_out_addresses(
    gcp: Plan, updates: dict[str, Plan]
) -> None:
    grants = {
        r["name"].removeprefix(f"{CFG.name}-key-").removesuffix("-agent"): r
        for r in gcp.of_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    }
    assert set(grants) == {"artifactregistry", "container", "storage", "logging", "compute"}
    # At preview the provider has not answered yet: only Compute Engine's agent, which its API returns no
    # email for, is the documented address.
    assert {n for n, r in grants.items() if r["inputs"]["member"] != planner.UNKNOWN} == {"compute"}
    assert grants["compute"]["inputs"]["member"] == (
        "serviceAccount:service-123456789012@compute-system.iam.gserviceaccount.com"
    )
    compute = gcp.named(f"{CFG.name}-services-compute", "gcp:projects/service:Service")
    assert compute["urn"] in grants["compute"]["dependencies"]  # the agent exists once the API is on
    identities = {
        r["inputs"]["service"]: r for r in gcp.of_type("gcp:projects/serviceIdentity:ServiceIdentity")
    }
    assert set(identities) == {"artifactregistry.googleapis.com", "container.googleapis.com"}
    for api, identity in identities.items():
        service = gcp.named(f"{CFG.name}-services-{api.split('.')[0]}", "gcp:projects/service:Service")
        assert service["urn"] in identity["dependencies"]
    members = {
        r["name"].removeprefix(f"{CFG.name}-key-").removesuffix("-agent"): r["inputs"]["member"]
        for r in updates["gcp-dev"].of_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    }
    # What the lookups answered (the plan's placeholder project number 123456789012).
    assert (
        members["storage"]
        == "serviceAccount:service-123456789012@gs-project-accounts.iam.gserviceaccount.com"
    )
    assert members["logging"] == "serviceAccount:service-123456789012@gcp-sa-logging.iam.gserviceaccount.com"


# Which APIs each kind of resource calls (Google's API reference for each resource).
API_OF = {
    "gcp:kms/": {"cloudkms"},
    "gcp:storage/": {"storage"},
    "gcp:artifactregistry/": {"artifactregistry"},
    "gcp:container/": {"container", "compute"},
    "gcp:compute/": {"compute"},
    "gcp:serviceaccount/": {"iam"},
    "gcp:projects/iAMMember": {"cloudresourcemanager"},
    "gcp:projects/iAMAuditConfig": {"cloudresourcemanager"},
    "gcp:logging/": {"logging"},
    "gcp:monitoring/": {"monitoring"},
    "gcp:billing/": {"billingbudgets"},
    "gcp:pubsub/": {"pubsub"},
}


def test_every_resource_waits_for_the_apis_it_calls(gcp: Plan) -> None:
    services = {
        r["urn"]: r["inputs"]["service"].split(".")[0] for r in gcp.of_type("gcp:projects/service:Service")
    }
    assert set(services.values()) == set().union(*API_OF.values())
    checked = 0
    for r in gcp.iter_custom():
        wanted = next((apis for prefix, apis in API_OF.items() if r["type"].startswith(prefix)), None)
        if wanted is None:
            continue
        assert {services[d] for d in r["dependencies"] if d in services} >= wanted, r["name"]
        checked += 1
    assert checked >= 45
    for s in gcp.of_type("gcp:projects/service:Service"):
        assert s["inputs"]["disableOnDestroy"] is False


def test_budget_calls_bill_the_stacks_project(gcp: Plan) -> None:
    """With user credentials the Billing Budgets API needs a quota project, or it answers 403."""
    budget = gcp.one("gcp:billing/budget:Budget")
    provider = gcp.by_urn["::".join(budget["provider"].split("::")[:-1])]
    assert provider["type"] == "pulumi:providers:gcp"
    assert (provider["inputs"]["billingProject"], provider["inputs"]["userProjectOverride"]) == (
        CFG.gcp_project,
        "true",
    )
    others = {r["provider"] for r in gcp.iter_custom() if r["type"].startswith("gcp:") and r is not budget}
    assert budget["provider"] not in others


def test_every_bucket_is_cmek_private_versioned_logged_in_region(gcp: Plan) -> None:
    buckets = gcp.of_type("gcp:storage/bucket:Bucket")
    assert sorted(b["inputs"]["name"] for b in buckets) == sorted(global_name(CFG, x) for x in BUCKETS)
    for b in buckets:
        i = b["inputs"]
        purpose = i["name"].rsplit("-", 1)[1]
        assert i["location"] == CFG.region.upper()
        assert i["encryption"] == {"defaultKmsKeyName": KEY_NAME}
        assert i["publicAccessPrevention"] == "enforced"
        assert i["uniformBucketLevelAccess"] is True
        assert i["versioning"] == {"enabled": True}
        actions = [(r["action"]["type"], r["condition"]) for r in i["lifecycleRules"]]
        assert ("AbortIncompleteMultipartUpload", {"age": 7.0}) in actions
        assert any(t == "Delete" and "daysSinceNoncurrentTime" in c for t, c in actions)
        if purpose == "checkpoints":
            assert ("Delete", {"age": float(CFG.checkpoint_expiry_days), "withState": "LIVE"}) in actions
        if purpose != "logs":
            assert i["logging"]["logBucket"] == global_name(CFG, "logs")
        # The key grant to the storage agent exists before any bucket uses the key.
        grant = gcp.one("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember", "-storage-agent")
        assert grant["urn"] in b["dependencies"]


def test_identities_bind_one_kubernetes_sa_and_single_buckets(gcp: Plan) -> None:
    members = {r["inputs"]["member"] for r in gcp.of_type("gcp:serviceaccount/iAMMember:IAMMember")}
    assert members == {
        "serviceAccount:acme-ml-platform-dev.svc.id.goog[training/trainer]",
        "serviceAccount:acme-ml-platform-dev.svc.id.goog[serving/triton]",
        "serviceAccount:acme-ml-platform-dev.svc.id.goog[ci/ci-deployer]",
        "serviceAccount:acme-ml-platform-dev.svc.id.goog[drift/monitor]",
        # The budget job's own account (infra/gcp/budget.py; tests/infra/test_infra_budget_job.py).
        "serviceAccount:acme-ml-platform-dev.svc.id.goog[cost/budget]",
    }
    # Whole-bucket grants (prefix grants carry an IAM condition: test_infra_monitoring_cloud.py).
    granted = {
        (r["inputs"]["member"], r["inputs"]["bucket"], r["inputs"]["role"])
        for r in gcp.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
        if r["inputs"]["member"].startswith("serviceAccount:") and "condition" not in r["inputs"]
    }
    trainer = "serviceAccount:mlp-gcp-dev-trainer@acme-ml-platform-dev.iam.gserviceaccount.com"
    server = "serviceAccount:mlp-gcp-dev-server@acme-ml-platform-dev.iam.gserviceaccount.com"
    assert granted == {
        (trainer, "acme-mlp-gcp-dev-raw", "roles/storage.objectViewer"),
        (trainer, "acme-mlp-gcp-dev-splits", "roles/storage.objectViewer"),
        (trainer, "acme-mlp-gcp-dev-checkpoints", "roles/storage.objectUser"),
        (trainer, "acme-mlp-gcp-dev-models", "roles/storage.objectCreator"),
        (server, "acme-mlp-gcp-dev-models", "roles/storage.objectViewer"),
    }
    pushers = {
        (r["inputs"]["repository"], r["inputs"]["role"])
        for r in gcp.of_type("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
        if "ci-deployer" in r["inputs"]["member"]
    }
    assert pushers == {
        ("mlp-gcp-dev-training", "roles/artifactregistry.writer"),
        ("mlp-gcp-dev-serving", "roles/artifactregistry.writer"),
    }
    # No identity gets project-wide roles (only the node service account does, for logs and metrics).
    project_members = {r["inputs"]["member"] for r in gcp.of_type("gcp:projects/iAMMember:IAMMember")}
    assert all("-nodes@" in m for m in project_members)
    annotations = {
        r["inputs"]["metadata"]["name"]: r["inputs"]["metadata"]["annotations"]
        for r in gcp.of_type("kubernetes:core/v1:ServiceAccount")
    }
    assert annotations["trainer"] == {
        "iam.gke.io/gcp-service-account": f"{CFG.name}-trainer@{CFG.gcp_project}.iam.gserviceaccount.com"
    }


def test_registry_is_cmek_and_immutable(gcp: Plan) -> None:
    repos = gcp.of_type("gcp:artifactregistry/repository:Repository")
    assert len(repos) == 2
    for r in repos:
        assert r["inputs"]["kmsKeyName"] == KEY_NAME
        assert r["inputs"]["dockerConfig"] == {"immutableTags": True}
        assert r["inputs"]["location"] == CFG.region


def test_cluster_private_encrypted_restricted_with_network_policy(gcp: Plan) -> None:
    c = gcp.one("gcp:container/cluster:Cluster")["inputs"]
    assert c["privateClusterConfig"]["enablePrivateNodes"] is True
    assert [b["cidrBlock"] for b in c["masterAuthorizedNetworksConfig"]["cidrBlocks"]] == list(
        CFG.network.api_allowed_cidrs
    )
    assert c["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": KEY_NAME}
    assert c["datapathProvider"] == "ADVANCED_DATAPATH"
    assert c["workloadIdentityConfig"] == {"workloadPool": f"{CFG.gcp_project}.svc.id.goog"}
    assert "APISERVER" in c["loggingConfig"]["enableComponents"]
    assert c["removeDefaultNodePool"] is True


def test_spot_gpu_pool_from_zero_with_driver_and_taint(gcp: Plan) -> None:
    pool = gcp.one("gcp:container/nodePool:NodePool", "-gpu")["inputs"]
    assert pool["autoscaling"]["totalMinNodeCount"] == 0.0
    assert pool["autoscaling"]["totalMaxNodeCount"] == CFG.cluster.gpu_pool.max_nodes
    nc = pool["nodeConfig"]
    assert nc["spot"] is True
    assert nc["guestAccelerators"] == [
        {
            "type": CFG.cluster.gpu_pool.gpu_type,
            "count": 1.0,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
        }
    ]
    assert nc["taints"] == [{"key": GPU_TAINT_KEY, "value": "present", "effect": "NO_SCHEDULE"}]
    assert nc["labels"] == {POOL_LABEL: "gpu"}
    for p in gcp.of_type("gcp:container/nodePool:NodePool"):
        assert p["inputs"]["nodeConfig"]["bootDiskKmsKey"] == KEY_NAME
    assert gcp.one("gcp:container/nodePool:NodePool", "-system")["inputs"]["nodeConfig"]["spot"] is False
    # GKE brings its own device plugin: not installed twice.
    assert not [
        r
        for r in gcp.of_type("kubernetes:helm.sh/v3:Release")
        if r["inputs"]["chart"] == "nvidia-device-plugin"
    ]


def test_audit_logs_kept_a_year_and_budget(gcp: Plan) -> None:
    audit = gcp.one("gcp:projects/iAMAuditConfig:IAMAuditConfig")["inputs"]
    assert audit["service"] == "storage.googleapis.com"
    assert {c["logType"] for c in audit["auditLogConfigs"]} == {"ADMIN_READ", "DATA_READ", "DATA_WRITE"}
    bucket = gcp.one("gcp:logging/projectBucketConfig:ProjectBucketConfig")["inputs"]
    assert bucket["retentionDays"] >= 365 and bucket["location"] == CFG.region
    assert bucket["cmekSettings"] == {"kmsKeyName": KEY_NAME}
    budget = gcp.one("gcp:billing/budget:Budget")["inputs"]
    assert budget["amount"]["specifiedAmount"] == {
        "currencyCode": "EUR",
        "units": str(int(CFG.budget.monthly_amount)),
    }
    assert budget["budgetFilter"]["projects"] == [f"projects/{planner.MOCK_GCP_PROJECT_NUMBER}"]
    current = sorted(
        r["thresholdPercent"] for r in budget["thresholdRules"] if r["spendBasis"] == "CURRENT_SPEND"
    )
    assert current == [t / 100 for t in CFG.budget.alert_thresholds]
