"""Each rule: the compliant fixture stacks pass, and each mutant fails with exactly the expected violations.

Evaluated in-process (pure rule functions); tests/policies/test_protocol.py runs the same rules through
the real pack process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import policy_cases
import policy_fixtures as fx
import pytest

from policies.analyze import plan_from_dict, to_resources
from policies.rules import ALL_RULES, Context, evaluate
from policies.rules.encryption import iso_days
from policies.rules.location import normalize

Plan = dict[str, Any]


def violations(plan: Plan, config: dict[str, Any] | None = None) -> set[tuple[str, str | None]]:
    """(rule, resource name) per finding; an undetermined finding's name ends in '?'."""
    p = plan_from_dict(plan)
    found = evaluate(to_resources(p), Context(config=config or {}, environment=p.environment))
    return {
        (rule, (f.urn.rsplit("::", 1)[-1] + ("?" if f.undetermined else "")) if f.urn else None)
        for rule, f in found
    }


@pytest.mark.parametrize("make", [fx.aws_stack, fx.gcp_stack, fx.azure_stack], ids=["aws", "gcp", "azure"])
def test_compliant_fixtures_pass_every_rule(make: Callable[[], Plan]) -> None:
    assert violations(make()) == set()


def test_compliant_prod_fixture_passes() -> None:
    assert violations(fx.aws_stack("prod", "prod")) == set()


def _inputs(plan: Plan, type_: str, name: str) -> dict[str, Any]:
    return fx.find(plan, type_, name)["inputs"]


def _drop(plan: Plan, type_: str, name: str) -> None:
    plan["resources"].remove(fx.find(plan, type_, name))


def _set(type_: str, name: str, path: str, value: Any) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        cur = _inputs(plan, type_, name)
        keys = path.split(".")
        for k in keys[:-1]:
            cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
        if value is _DELETE:
            del cur[keys[-1]]
        else:
            cur[keys[-1]] = value

    return mutate


_DELETE = object()
S3 = "aws:s3/bucket:Bucket"
KMS = "aws:kms/key:Key"
EKS = "aws:eks/cluster:Cluster"
NG = "aws:eks/nodeGroup:NodeGroup"
DEP = "kubernetes:apps/v1:Deployment"
GCS = "gcp:storage/bucket:Bucket"
GKE = "gcp:container/cluster:Cluster"
GNP = "gcp:container/nodePool:NodePool"
SA = "azure-native:storage:StorageAccount"
AKS = "azure-native:containerservice:ManagedCluster"
POOL = "azure-native:containerservice:AgentPool"
BUCKETS = ("data", "checkpoints", "models", "access-logs")


def _drop_companions(kind: str) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        plan["resources"] = [r for r in plan["resources"] if not r["name"].endswith(f"-{kind}")]

    return mutate


def _wildcard_policy(plan: Plan) -> None:
    doc = {"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    _inputs(plan, "aws:iam/policy:Policy", "training-data-access")["policy"] = json.dumps(doc)


def _public_bucket_policy(plan: Plan) -> None:
    doc = json.loads(_inputs(plan, "aws:s3/bucketPolicy:BucketPolicy", "models-policy")["policy"])
    doc["Statement"].append(
        {"Sid": "Public", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "*"}
    )
    _inputs(plan, "aws:s3/bucketPolicy:BucketPolicy", "models-policy")["policy"] = json.dumps(doc)


def _wildcard_key_policy(plan: Plan) -> None:
    doc = {
        "Statement": [
            {
                "Sid": "Anyone",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": "kms:Decrypt",
                "Resource": "*",
            }
        ]
    }
    _inputs(plan, KMS, "data-key")["policy"] = json.dumps(doc)


def _container(plan: Plan) -> dict[str, Any]:
    return _inputs(plan, DEP, "sentiment")["spec"]["template"]["spec"]["containers"][0]


def _add(plan: Plan, type_: str, name: str, inputs: dict[str, Any]) -> None:
    plan["resources"].append(fx.res(plan["stack"], type_, name, inputs))


CASES: list[tuple[str, Callable[[], Plan], Callable[[Plan], None], set[tuple[str, str | None]]]] = [
    # 1. residency
    ("aws-provider-us", fx.aws_stack, _set("pulumi:providers:aws", "aws-eu", "region", "us-east-1"), None),  # type: ignore[list-item]  # every AWS resource inherits it: checked below
    (
        "aws-resource-region",
        fx.aws_stack,
        _set(S3, "data", "region", "eu-west-2"),
        {("eu-data-residency", "data")},
    ),
    ("gcs-us", fx.gcp_stack, _set(GCS, "models", "location", "US"), {("eu-data-residency", "models")}),
    ("gcs-eu-multi-region-ok", fx.gcp_stack, _set(GCS, "models", "location", "EU"), set()),
    ("azure-uk", fx.azure_stack, _set(SA, "data", "location", "uksouth"), {("eu-data-residency", "data")}),
    (
        "gcp-provider-unresolvable",
        fx.gcp_stack,
        _set("pulumi:providers:gcp", "gcp-eu", "region", _DELETE),
        {("eu-location-resolvable", n) for n in ("gcp-eu", "data-key", "trainer-data", "audit", "monthly")},
    ),
    # 2. encryption at rest
    (
        "s3-no-sse",
        fx.aws_stack,
        lambda p: _drop(
            p,
            "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
            "models-sse",
        ),
        {("s3-bucket-cmk-encryption", "models")},
    ),
    (
        "s3-aes256",
        fx.aws_stack,
        _set(
            "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
            "data-sse",
            "rules.0.applyServerSideEncryptionByDefault.sseAlgorithm",
            "AES256",
        ),
        {("s3-bucket-cmk-encryption", "data")},
    ),
    (
        "eks-no-secrets-encryption",
        fx.aws_stack,
        _set(EKS, "cluster", "encryptionConfig", _DELETE),
        {("encryption-at-rest-cmk", "cluster")},
    ),
    (
        "ecr-aes",
        fx.aws_stack,
        _set(
            "aws:ecr/repository:Repository",
            "serving",
            "encryptionConfigurations",
            [{"encryptionType": "AES256"}],
        ),
        {("encryption-at-rest-cmk", "serving")},
    ),
    (
        "loggroup-no-kms",
        fx.aws_stack,
        _set("aws:cloudwatch/logGroup:LogGroup", "cluster-logs", "kmsKeyId", _DELETE),
        {("encryption-at-rest-cmk", "cluster-logs")},
    ),
    (
        "launch-template-unencrypted",
        fx.aws_stack,
        _set(
            "aws:ec2/launchTemplate:LaunchTemplate", "gpu-lt", "blockDeviceMappings.0.ebs.encrypted", "false"
        ),
        {("encryption-at-rest-cmk", "gpu-lt")},
    ),
    (
        "gcs-no-cmek",
        fx.gcp_stack,
        _set(GCS, "data", "encryption", _DELETE),
        {("encryption-at-rest-cmk", "data")},
    ),
    (
        "gke-no-db-encryption",
        fx.gcp_stack,
        _set(GKE, "cluster", "databaseEncryption.state", "DECRYPTED"),
        {("encryption-at-rest-cmk", "cluster")},
    ),
    (
        "azure-ms-keys",
        fx.azure_stack,
        _set(SA, "data", "encryption", {"keySource": "Microsoft.Storage"}),
        {("encryption-at-rest-cmk", "data")},
    ),
    (
        "aks-no-kms",
        fx.azure_stack,
        _set(AKS, "cluster", "securityProfile", _DELETE),
        {("encryption-at-rest-cmk", "cluster")},
    ),
    # 3. key hygiene
    (
        "kms-rotation-off",
        fx.aws_stack,
        _set(KMS, "data-key", "enableKeyRotation", False),
        {("kms-key-rotation", "data-key")},
    ),
    (
        "kms-rotation-365",
        fx.aws_stack,
        _set(KMS, "data-key", "rotationPeriodInDays", _DELETE),
        {("kms-key-rotation", "data-key")},
    ),
    (
        "kms-window-7-prod",
        lambda: fx.aws_stack("prod", "prod"),
        _set(KMS, "data-key", "deletionWindowInDays", 7.0),
        {("kms-key-deletion-protection", "data-key")},
    ),
    ("kms-window-7-dev-ok", fx.aws_stack, _set(KMS, "data-key", "deletionWindowInDays", 7.0), set()),
    (
        "kms-wildcard-principal",
        fx.aws_stack,
        _wildcard_key_policy,
        {("kms-key-policy-no-wildcard-principal", "data-key")},
    ),
    (
        "gcp-rotation-1y",
        fx.gcp_stack,
        _set("gcp:kms/cryptoKey:CryptoKey", "data-key", "rotationPeriod", "31536000s"),
        {("kms-key-rotation", "data-key")},
    ),
    (
        "gcp-destroy-1d",
        fx.gcp_stack,
        _set("gcp:kms/cryptoKey:CryptoKey", "data-key", "destroyScheduledDuration", "86400s"),
        {("kms-key-deletion-protection", "data-key")},
    ),
    (
        "vault-no-purge-protection",
        fx.azure_stack,
        _set("azure-native:keyvault:Vault", "kv", "properties.enablePurgeProtection", False),
        {("kms-key-deletion-protection", "kv")},
    ),
    (
        "azure-key-no-rotation",
        fx.azure_stack,
        _set("azure-native:keyvault:Key", "data", "properties", {}),
        {("kms-key-rotation", "data")},
    ),
    # 4. public access
    (
        "s3-no-pab",
        fx.aws_stack,
        lambda p: _drop(p, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "data-pab"),
        {("s3-bucket-public-access-block", "data")},
    ),
    (
        "s3-pab-partial",
        fx.aws_stack,
        _set(
            "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
            "models-pab",
            "restrictPublicBuckets",
            False,
        ),
        {("s3-bucket-public-access-block", "models")},
    ),
    (
        "s3-public-acl",
        fx.aws_stack,
        _set(S3, "data", "acl", "public-read"),
        {("s3-no-public-acl-or-policy", "data")},
    ),
    (
        "s3-public-policy",
        fx.aws_stack,
        _public_bucket_policy,
        {("s3-no-public-acl-or-policy", "models-policy")},
    ),
    (
        "gcs-pap-inherited",
        fx.gcp_stack,
        _set(GCS, "data", "publicAccessPrevention", "inherited"),
        {("gcs-public-access-prevention", "data")},
    ),
    (
        "gcs-no-ubla",
        fx.gcp_stack,
        _set(GCS, "data", "uniformBucketLevelAccess", False),
        {("gcs-public-access-prevention", "data")},
    ),
    (
        "gcs-allusers",
        fx.gcp_stack,
        _set("gcp:storage/bucketIAMMember:BucketIAMMember", "trainer-data", "member", "allUsers"),
        {("gcp-no-public-iam-members", "trainer-data")},
    ),
    (
        "azure-blob-public",
        fx.azure_stack,
        _set(SA, "data", "allowBlobPublicAccess", True),
        {("azure-storage-no-public-blob", "data")},
    ),
    (
        "azure-container-public",
        fx.azure_stack,
        _set("azure-native:storage:BlobContainer", "checkpoints", "publicAccess", "Blob"),
        {("azure-storage-no-public-blob", "checkpoints")},
    ),
    (
        "azure-network-public",
        fx.azure_stack,
        _set("azure-native:containerregistry:Registry", "acr", "publicNetworkAccess", "Enabled"),
        {("azure-public-network-access-disabled", "acr")},
    ),
    # 5. transport
    (
        "s3-no-tls-policy",
        fx.aws_stack,
        lambda p: _drop(p, "aws:s3/bucketPolicy:BucketPolicy", "checkpoints-policy"),
        {("s3-bucket-tls-only", "checkpoints")},
    ),
    (
        "azure-tls10",
        fx.azure_stack,
        _set(SA, "data", "minimumTlsVersion", "TLS1_0"),
        {("storage-min-tls-https-only", "data")},
    ),
    (
        "azure-http",
        fx.azure_stack,
        _set(SA, "data", "enableHttpsTrafficOnly", False),
        {("storage-min-tls-https-only", "data")},
    ),
    # 6. versioning, lifecycle, logging
    (
        "s3-no-versioning",
        fx.aws_stack,
        _drop_companions("versioning"),
        {("bucket-versioning", b) for b in BUCKETS},
    ),
    (
        "s3-suspended",
        fx.aws_stack,
        _set(
            "aws:s3/bucketVersioning:BucketVersioning",
            "models-versioning",
            "versioningConfiguration.status",
            "Suspended",
        ),
        {("bucket-versioning", "models")},
    ),
    (
        "s3-no-lifecycle",
        fx.aws_stack,
        _drop_companions("lifecycle"),
        {("bucket-lifecycle", b) for b in BUCKETS},
    ),
    (
        "s3-no-logging",
        fx.aws_stack,
        lambda p: _drop(p, "aws:s3/bucketLogging:BucketLogging", "data-logging"),
        {("bucket-access-logging", "data")},
    ),
    (
        "gcs-no-versioning",
        fx.gcp_stack,
        _set(GCS, "checkpoints", "versioning.enabled", False),
        {("bucket-versioning", "checkpoints")},
    ),
    (
        "gcs-no-lifecycle",
        fx.gcp_stack,
        _set(GCS, "checkpoints", "lifecycleRules", []),
        {("bucket-lifecycle", "checkpoints")},
    ),
    (
        "gcs-no-logging",
        fx.gcp_stack,
        _set(GCS, "models", "logging", _DELETE),
        {("bucket-access-logging", "models")},
    ),
    (
        "azure-no-versioning",
        fx.azure_stack,
        _set("azure-native:storage:BlobServiceProperties", "data-blob", "isVersioningEnabled", False),
        {("bucket-versioning", "data")},
    ),
    (
        "azure-no-lifecycle",
        fx.azure_stack,
        lambda p: _drop(p, "azure-native:storage:ManagementPolicy", "data-lifecycle"),
        {("bucket-lifecycle", "data")},
    ),
    # 7. IAM
    ("aws-wildcard-action", fx.aws_stack, _wildcard_policy, {("iam-no-wildcards", "training-data-access")}),
    (
        "aws-admin-attachment",
        fx.aws_stack,
        _set(
            "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
            "node-worker",
            "policyArn",
            "arn:aws:iam::aws:policy/AdministratorAccess",
        ),
        {("iam-no-admin", "node-worker")},
    ),
    (
        "gcp-basic-role",
        fx.gcp_stack,
        _set("gcp:storage/bucketIAMMember:BucketIAMMember", "trainer-data", "role", "roles/editor"),
        {("iam-no-admin", "trainer-data")},
    ),
    (
        "azure-owner-subscription",
        fx.azure_stack,
        lambda p: _inputs(p, "azure-native:authorization:RoleAssignment", "acr-pull").update(
            roleDefinitionId="/subscriptions/0000/providers/Microsoft.Authorization/roleDefinitions/8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
            scope="/subscriptions/0000",
        ),
        {("iam-no-admin", "acr-pull")},
    ),
    (
        "k8s-cluster-admin",
        fx.aws_stack,
        lambda p: _add(
            p,
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
            "ops",
            {"roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}},
        ),
        {("iam-no-admin", "ops")},
    ),
    (
        "k8s-wildcard-role",
        fx.aws_stack,
        lambda p: _add(
            p,
            "kubernetes:rbac.authorization.k8s.io/v1:Role",
            "all",
            {"rules": [{"apiGroups": [""], "resources": ["*"], "verbs": ["*"]}]},
        ),
        {("iam-no-wildcards", "all")},
    ),
    # 8. cluster
    (
        "eks-open-endpoint",
        fx.aws_stack,
        _set(EKS, "cluster", "vpcConfig.publicAccessCidrs", ["0.0.0.0/0"]),
        {("cluster-endpoint-restricted", "cluster")},
    ),
    (
        "eks-default-cidrs",
        fx.aws_stack,
        _set(EKS, "cluster", "vpcConfig.publicAccessCidrs", _DELETE),
        {("cluster-endpoint-restricted", "cluster")},
    ),
    (
        "gke-no-authorized-networks",
        fx.gcp_stack,
        _set(GKE, "cluster", "masterAuthorizedNetworksConfig", _DELETE),
        {("cluster-endpoint-restricted", "cluster")},
    ),
    (
        "aks-open",
        fx.azure_stack,
        _set(AKS, "cluster", "apiServerAccessProfile.authorizedIPRanges", ["0.0.0.0/0"]),
        {("cluster-endpoint-restricted", "cluster")},
    ),
    (
        "eks-no-audit",
        fx.aws_stack,
        _set(EKS, "cluster", "enabledClusterLogTypes", ["api"]),
        {("cluster-audit-logs", "cluster")},
    ),
    (
        "gke-no-apiserver-logs",
        fx.gcp_stack,
        _set(GKE, "cluster", "loggingConfig.enableComponents", ["SYSTEM_COMPONENTS"]),
        {("cluster-audit-logs", "cluster")},
    ),
    (
        "aks-no-audit",
        fx.azure_stack,
        lambda p: _drop(p, "azure-native:monitor:DiagnosticSetting", "cluster-audit"),
        {("cluster-audit-logs", "cluster")},
    ),
    (
        "eks-no-netpol",
        fx.aws_stack,
        lambda p: _drop(p, "aws:eks/addon:Addon", "vpc-cni"),
        {("cluster-network-policy", "cluster")},
    ),
    (
        "gke-no-netpol",
        fx.gcp_stack,
        _set(GKE, "cluster", "datapathProvider", "LEGACY_DATAPATH"),
        {("cluster-network-policy", "cluster")},
    ),
    (
        "aks-no-netpol",
        fx.azure_stack,
        _set(AKS, "cluster", "networkProfile.networkPolicy", _DELETE),
        {("cluster-network-policy", "cluster")},
    ),
    (
        "namespace-no-netpol",
        fx.aws_stack,
        lambda p: _drop(p, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "serving-default-deny"),
        {("cluster-network-policy", "sentiment")},
    ),
    # 9. spot GPU pools
    (
        "eks-on-demand",
        fx.aws_stack,
        _set(NG, "gpu-spot", "capacityType", "ON_DEMAND"),
        {("gpu-node-pool-spot", "gpu-spot")},
    ),
    (
        "eks-min-1-dev",
        fx.aws_stack,
        _set(NG, "gpu-spot", "scalingConfig.minSize", 1.0),
        {("gpu-node-pool-spot", "gpu-spot")},
    ),
    (
        "eks-max-64",
        fx.aws_stack,
        _set(NG, "gpu-spot", "scalingConfig.maxSize", 64.0),
        {("gpu-node-pool-spot", "gpu-spot")},
    ),
    ("eks-no-taint", fx.aws_stack, _set(NG, "gpu-spot", "taints", []), {("gpu-node-pool-spot", "gpu-spot")}),
    (
        "gke-not-spot",
        fx.gcp_stack,
        _set(GNP, "gpu-spot", "nodeConfig.spot", False),
        {("gpu-node-pool-spot", "gpu-spot")},
    ),
    (
        "aks-regular",
        fx.azure_stack,
        _set(POOL, "gpuspot", "scaleSetPriority", "Regular"),
        {("gpu-node-pool-spot", "gpuspot")},
    ),
    (
        "aks-no-taint",
        fx.azure_stack,
        _set(POOL, "gpuspot", "nodeTaints", []),
        {("gpu-node-pool-spot", "gpuspot")},
    ),
    (
        "no-checkpoint-bucket",
        fx.gcp_stack,
        lambda p: _drop(p, GCS, "checkpoints"),
        {("checkpoint-bucket-exists", None)},
    ),
    # 10. serving workload
    (
        "runs-as-root",
        fx.aws_stack,
        lambda p: _container(p)["securityContext"].pop("runAsNonRoot"),
        {("k8s-workload-security-context", "sentiment")},
    ),
    (
        "writable-root",
        fx.aws_stack,
        lambda p: _container(p)["securityContext"].update(readOnlyRootFilesystem=False),
        {("k8s-workload-security-context", "sentiment")},
    ),
    (
        "escalation",
        fx.aws_stack,
        lambda p: _container(p)["securityContext"].pop("allowPrivilegeEscalation"),
        {("k8s-workload-security-context", "sentiment")},
    ),
    (
        "no-limits",
        fx.aws_stack,
        lambda p: _container(p).pop("resources"),
        {("k8s-workload-resources-probes", "sentiment")},
    ),
    (
        "no-probes",
        fx.aws_stack,
        lambda p: _container(p).pop("readinessProbe"),
        {("k8s-workload-resources-probes", "sentiment")},
    ),
    (
        "latest-image",
        fx.aws_stack,
        lambda p: _container(p).update(image="registry.example.eu/serving:latest"),
        {("k8s-image-pinned", "sentiment")},
    ),
    (
        "prod-tag-not-digest",
        lambda: fx.aws_stack("prod", "prod"),
        lambda p: _container(p).update(image="registry.example.eu/serving:0.1.0"),
        {("k8s-image-pinned", "sentiment")},
    ),
    (
        "hpa-min-gt-max",
        fx.aws_stack,
        _set("kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "sentiment", "spec.minReplicas", 8.0),
        {("k8s-hpa-bounds", "sentiment")},
    ),
    (
        "hpa-over-cap",
        fx.aws_stack,
        _set("kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "sentiment", "spec.maxReplicas", 100.0),
        {("k8s-hpa-bounds", "sentiment")},
    ),
    (
        "no-hpa",
        fx.aws_stack,
        lambda p: _drop(p, "kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "sentiment"),
        {("k8s-serving-availability", "sentiment")},
    ),
    (
        "no-pdb",
        fx.aws_stack,
        lambda p: _drop(p, "kubernetes:policy/v1:PodDisruptionBudget", "sentiment"),
        {("k8s-serving-availability", "sentiment")},
    ),
    # 11. registries
    (
        "ecr-mutable",
        fx.aws_stack,
        _set("aws:ecr/repository:Repository", "serving", "imageTagMutability", "MUTABLE"),
        {("registry-immutable-scanned", "serving")},
    ),
    (
        "ecr-no-scan",
        fx.aws_stack,
        _set("aws:ecr/repository:Repository", "serving", "imageScanningConfiguration.scanOnPush", False),
        {("registry-immutable-scanned", "serving")},
    ),
    (
        "ar-mutable",
        fx.gcp_stack,
        _set("gcp:artifactregistry/repository:Repository", "images", "dockerConfig.immutableTags", False),
        {("registry-immutable-scanned", "images")},
    ),
    (
        "acr-admin",
        fx.azure_stack,
        _set("azure-native:containerregistry:Registry", "acr", "adminUserEnabled", True),
        {("registry-no-anonymous-access", "acr")},
    ),
    (
        "acr-anonymous",
        fx.azure_stack,
        _set("azure-native:containerregistry:Registry", "acr", "anonymousPullEnabled", True),
        {("registry-no-anonymous-access", "acr")},
    ),
    (
        "ecr-public-policy",
        fx.aws_stack,
        lambda p: _add(
            p,
            "aws:ecr/repositoryPolicy:RepositoryPolicy",
            "serving-policy",
            {
                "repository": "serving",
                "policy": json.dumps(
                    {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "ecr:BatchGetImage"}]}
                ),
            },
        ),
        {("registry-no-anonymous-access", "serving-policy")},
    ),
    (
        "helm-floating",
        fx.aws_stack,
        lambda p: _add(
            p,
            "kubernetes:helm.sh/v3:Release",
            "autoscaler",
            {
                "chart": "cluster-autoscaler",
                "version": "9.x",
                "repositoryOpts": {"repo": "http://charts.example.eu"},
            },
        ),
        {("helm-chart-pinned", "autoscaler")},
    ),
    # 12. audit
    (
        "trail-single-region",
        fx.aws_stack,
        _set("aws:cloudtrail/trail:Trail", "trail", "isMultiRegionTrail", False),
        {("audit-trail-enabled", "trail")},
    ),
    (
        "gcp-no-audit-config",
        fx.gcp_stack,
        lambda p: _drop(p, "gcp:projects/iAMAuditConfig:IAMAuditConfig", "audit"),
        {("audit-trail-enabled", None)},
    ),
    (
        "azure-no-diagnostics",
        fx.azure_stack,
        lambda p: p.update(
            resources=[r for r in p["resources"] if r["type"] != "azure-native:monitor:DiagnosticSetting"]
        ),
        {("audit-trail-enabled", None), ("cluster-audit-logs", "cluster"), ("bucket-access-logging", "data")},
    ),
    (
        "loggroup-30-days",
        fx.aws_stack,
        _set("aws:cloudwatch/logGroup:LogGroup", "cluster-logs", "retentionInDays", 30.0),
        {("log-retention-365", "cluster-logs")},
    ),
    (
        "gcp-log-default-retention",
        fx.gcp_stack,
        _set("gcp:logging/projectBucketConfig:ProjectBucketConfig", "audit-logs", "retentionDays", _DELETE),
        {("log-retention-365", "audit-logs")},
    ),
    (
        "azure-workspace-30",
        fx.azure_stack,
        _set("azure-native:operationalinsights:Workspace", "logs", "retentionInDays", 30.0),
        {("log-retention-365", "logs")},
    ),
    # 13. cost
    (
        "aws-no-budget",
        fx.aws_stack,
        lambda p: _drop(p, "aws:budgets/budget:Budget", "monthly"),
        {("budget-alerts", None)},
    ),
    (
        "gcp-budget-no-alerts",
        fx.gcp_stack,
        _set("gcp:billing/budget:Budget", "monthly", "thresholdRules", []),
        {("budget-alerts", None)},
    ),
    (
        "azure-no-budget",
        fx.azure_stack,
        lambda p: _drop(p, "azure-native:consumption:Budget", "monthly"),
        {("budget-alerts", None)},
    ),
    (
        "aws-default-tags-missing-owner",
        fx.aws_stack,
        _set("pulumi:providers:aws", "aws-eu", "defaultTags", json.dumps({"tags": {**fx.TAGS, "owner": ""}})),
        {
            ("required-tags", n)
            for n in (
                "data-key",
                "data",
                "checkpoints",
                "models",
                "access-logs",
                "cluster",
                "gpu-lt",
                "gpu-spot",
                "serving",
                "training-data-access",
                "cluster-logs",
                "trail",
                "monthly",
            )
        },
    ),
    (
        "gcs-label-missing",
        fx.gcp_stack,
        lambda p: (
            _set(
                "pulumi:providers:gcp", "gcp-eu", "defaultLabels", json.dumps({"project": "eu-ml-platform"})
            )(p),
            _inputs(p, GKE, "cluster")["resourceLabels"].pop("cost-centre"),
        ),
        {
            ("required-tags", n)
            for n in ("data-key", "data", "checkpoints", "models", "access-logs", "cluster")
        },
    ),
    (
        "azure-tag-missing",
        fx.azure_stack,
        lambda p: _inputs(p, SA, "data").update(tags={"project": "eu-ml-platform"}),
        {("required-tags", "data")},
    ),
]


CASES += policy_cases.CASES


@pytest.mark.parametrize(
    ("make", "mutate", "expected"),
    [c[1:] for c in CASES if c[3] is not None],
    ids=[c[0] for c in CASES if c[3] is not None],
)
def test_mutant_is_caught_exactly(
    make: Callable[[], Plan], mutate: Callable[[Plan], None], expected: set[tuple[str, str | None]]
) -> None:
    plan = make()
    mutate(plan)
    assert violations(plan) == expected


def test_provider_outside_eu_flags_every_inheriting_resource() -> None:
    plan = fx.aws_stack()
    _inputs(plan, "pulumi:providers:aws", "aws-eu")["region"] = "us-east-1"
    found = violations(plan)
    aws_names = {
        r["name"] for r in plan["resources"] if r["type"].startswith(("aws:", "pulumi:providers:aws"))
    }
    assert found == {("eu-data-residency", n) for n in aws_names}


def test_allowed_regions_config_admits_a_reviewed_region() -> None:
    plan = fx.aws_stack()
    _inputs(plan, S3, "data")["region"] = "eu-west-2"
    assert violations(plan, {"allowedRegions": ["eu-west-2"]}) == set()


def test_every_rule_has_a_mutant() -> None:
    caught = {rule for c in CASES if c[3] for rule, _ in c[3]} | {"eu-data-residency"}
    untested = {r.name for r in ALL_RULES} - caught - {"aws-iam-policy-lint"}  # Parliament: pack venv only
    assert untested == set()


def test_unknown_values_are_reported_as_undetermined_never_as_passing() -> None:
    plan = fx.aws_stack()
    # A policy document built from ARNs unknown at preview: the TLS rule cannot judge it either way.
    _inputs(plan, "aws:s3/bucketPolicy:BucketPolicy", "data-policy")["policy"] = fx.UNKNOWN
    _inputs(plan, EKS, "cluster")["vpcConfig"]["publicAccessCidrs"] = fx.UNKNOWN
    p = plan_from_dict(plan)
    found = evaluate(to_resources(p), Context(environment=p.environment))
    assert {(rule, f.urn.rsplit("::", 1)[-1], f.undetermined) for rule, f in found} == {
        ("s3-bucket-tls-only", "data", True),
        ("cluster-endpoint-restricted", "cluster", True),
    }


def test_guard_skips_other_types() -> None:
    rule = next(r for r in ALL_RULES if r.name == "gcs-public-access-prevention")
    assert not rule.applies_to("aws:s3/bucket:Bucket")
    assert rule.applies_to("gcp:storage/bucket:Bucket")


@pytest.mark.parametrize(
    ("cloud", "raw", "expected"),
    [
        ("gcp", "europe-west1-b", "europe-west1"),
        ("aws", "eu-south-2a", "eu-south-2"),
        ("azure", "West Europe", "westeurope"),
    ],
)
def test_location_normalisation(cloud: str, raw: str, expected: str) -> None:
    assert normalize(cloud, raw) == expected


@pytest.mark.parametrize(("text", "days"), [("P90D", 90), ("P3M", 90), ("7776000s", 90), ("P1Y", 365)])
def test_iso_days(text: str, days: float) -> None:
    assert iso_days(text) == days


def test_wire_values_as_the_engine_hands_them_to_a_pack() -> None:
    from policies.analyze import to_wire

    secret = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "[secret]"}
    ref = {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e", "urn": "urn:x", "id": ""}
    assert to_wire({"a": secret, "b": [ref], "c": "<unknown>", "d": 2.0}) == {
        "a": "[secret]",
        "b": [fx.UNKNOWN],
        "c": fx.UNKNOWN,
        "d": 2.0,
    }


def test_component_reference_becomes_its_urn() -> None:
    from policies.analyze import to_wire

    ref = {
        "4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e",
        "urn": "urn:pulumi:dev::p::c:m:C::x",
    }
    assert to_wire(ref) == "urn:pulumi:dev::p::c:m:C::x"


def test_coverage_gap_is_reported_for_an_unreviewed_type() -> None:
    """The coverage check can fail: a type no rule reads (residency does not count) and no reason covers."""
    from policies.evidence import coverage_for

    docs = [
        {
            "stack": "dev",
            "resources": [
                {
                    "urn": "u1",
                    "type": "aws:sagemaker/endpoint:Endpoint",
                    "name": "e",
                },  # only residency reads it
                {
                    "urn": "u2",
                    "type": "aws:s3/bucketV2:BucketV2",
                    "name": "b",
                },  # V2 token: the S3 rules read it
                {"urn": "u3", "type": "azure-native:storage/v20230101:StorageAccount", "name": "s"},
            ],
        }
    ]
    coverage = coverage_for(docs, {})
    assert coverage["aws:sagemaker/endpoint:Endpoint"]["rules"] == []
    assert "s3-bucket-public-access-block" in coverage["aws:s3/bucketV2:BucketV2"]["rules"]
    assert "encryption-at-rest-cmk" in coverage["azure-native:storage/v20230101:StorageAccount"]["rules"]
    assert coverage_for(docs, {"aws:sagemaker/*": "reviewed"})["aws:sagemaker/endpoint:Endpoint"]["reason"]
