"""Rule mutants, sections 1-6: residency, encryption at rest, key hygiene, public access, transport,
and bucket versioning, lifecycle and logging.

One mutant per failure mode of each rule, grouped by the data the rules protect;
test_policy_rules.py runs them with the other sections' cases.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import policy_fixtures as fx
from policy_mutators import (
    _DELETE,
    AKS,
    BUCKETS,
    EKS,
    GCS,
    GKE,
    KMS,
    S3,
    SA,
    Case,
    Plan,
    _drop,
    _inputs,
    _set,
    add,
)

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


def _drop_companions(kind: str) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        plan["resources"] = [r for r in plan["resources"] if not r["name"].endswith(f"-{kind}")]

    return mutate


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


CASES: list[Case] = [
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
        # pulumi-aws Bucket's inline ACL grants (`grants[].uri`), not BucketAcl's accessControlPolicy
        "s3-public-inline-grant",
        fx.aws_stack,
        _set(S3, "data", "grants", [{"type": "Group", "uri": ALL_USERS, "permissions": ["READ"]}]),
        {("s3-no-public-acl-or-policy", "data")},
    ),
    (
        # pulumi-aws 7 keeps BucketAclV2 as a deprecated alias of BucketAcl (core.canonical_type): still judged
        "s3-public-grant-bucket-acl-v2",
        fx.aws_stack,
        add(
            "aws:s3/bucketAclV2:BucketAclV2",
            "data-acl",
            {
                "bucket": "eu-ml-dev-data",
                "accessControlPolicy": {
                    "owner": {"id": "owner"},
                    "grants": [{"grantee": {"type": "Group", "uri": ALL_USERS}, "permission": "READ"}],
                },
            },
        ),
        {("s3-no-public-acl-or-policy", "data-acl")},
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
]
