"""Encryption at rest with the environment's customer-managed key, and key hygiene."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .core import (
    Context,
    Finding,
    Resource,
    Rule,
    as_list,
    get,
    is_unknown,
    of_type,
    references,
    truthy,
    types,
    undetermined,
)

S3_BUCKET = "aws:s3/bucket:Bucket"
S3_SSE = types("aws:s3/bucketServerSideEncryptionConfiguration*")


def _set(value: Any) -> bool:
    """A key reference counts when present, even if unknown at preview (it is created in the stack)."""
    return is_unknown(value) or (isinstance(value, str) and value.strip() != "")


def _missing(value: Any) -> bool:
    return not _set(value)


def _aws(r: Resource) -> Iterator[str]:
    i = r.inputs
    if r.type == "aws:eks/cluster:Cluster":
        enc = as_list(get(i, "encryptionConfig"))
        cfg = enc[0] if enc else get(i, "encryptionConfig") or {}
        if _missing(get(cfg, "provider.keyArn")) or "secrets" not in as_list(get(cfg, "resources")):
            yield "EKS cluster secrets are not envelope-encrypted: set encryptionConfig.provider.keyArn to the environment's KMS key and resources=['secrets']."
    elif r.type == "aws:ecr/repository:Repository":
        cfgs = as_list(get(i, "encryptionConfigurations"))
        if not any(get(c, "encryptionType") == "KMS" and _set(get(c, "kmsKey")) for c in cfgs):
            yield "ECR repository is not encrypted with the environment's KMS key: set encryptionConfigurations=[{encryptionType: 'KMS', kmsKey: <key arn>}]."
    elif r.type in (
        "aws:cloudwatch/logGroup:LogGroup",
        "aws:cloudtrail/trail:Trail",
        "aws:secretsmanager/secret:Secret",
    ):
        if _missing(get(i, "kmsKeyId")):
            yield f"{r.type.rsplit(':', 1)[-1]} '{r.name}' has no kmsKeyId: set it to the environment's KMS key ARN."
    elif r.type in ("aws:sns/topic:Topic", "aws:sqs/queue:Queue"):
        if _missing(get(i, "kmsMasterKeyId")):
            yield f"{r.type.rsplit(':', 1)[-1]} '{r.name}' has no kmsMasterKeyId: set it to the environment's KMS key."
    elif r.type == "aws:ec2/launchTemplate:LaunchTemplate":
        for n, bdm in enumerate(as_list(get(i, "blockDeviceMappings"))):
            ebs = get(bdm, "ebs") or {}
            if is_unknown(get(ebs, "encrypted")):
                yield undetermined(f"blockDeviceMappings[{n}].ebs.encrypted is unknown at preview")
            elif not truthy(get(ebs, "encrypted")):
                yield f"blockDeviceMappings[{n}].ebs is not encrypted: set encrypted='true' and kmsKeyId."
            elif _missing(get(ebs, "kmsKeyId")):
                yield f"blockDeviceMappings[{n}].ebs uses the AWS-managed key: set kmsKeyId to the environment's KMS key."
    elif r.type == "aws:ebs/volume:Volume":
        if is_unknown(get(i, "encrypted")):
            yield undetermined("encrypted is unknown at preview")
        elif get(i, "encrypted") is not True:
            yield "EBS volume is not encrypted: set encrypted=True and kmsKeyId to the environment's KMS key."
        elif _missing(get(i, "kmsKeyId")):
            yield "EBS volume uses the AWS-managed key: set kmsKeyId to the environment's KMS key."
    elif r.type == "aws:eks/nodeGroup:NodeGroup":
        if get(i, "launchTemplate") is None:
            yield "EKS node group has no launchTemplate, so its root volumes use the account default key: attach a launch template whose blockDeviceMappings are encrypted with the environment's KMS key."
    elif r.type == S3_BUCKET:
        # Only the deprecated inline form is checked here; the separate resource is s3-bucket-cmk-encryption.
        inline = get(i, "serverSideEncryptionConfiguration")
        if inline is not None and not _sse_is_cmk(inline):
            yield "inline serverSideEncryptionConfiguration does not use aws:kms with a customer-managed key."


def _sse_is_cmk(cfg: Any) -> bool:
    rules = as_list(get(cfg, "rules")) or as_list(get(cfg, "rule"))
    for rule in rules:
        default = get(rule, "applyServerSideEncryptionByDefault") or {}
        if get(default, "sseAlgorithm") in ("aws:kms", "aws:kms:dsse") and _set(
            get(default, "kmsMasterKeyId")
        ):
            return True
    return False


# GCP types whose only CMEK setting is one key reference: (path, what to say when it is missing).
_GCP_KEY = {
    "gcp:storage/bucket:Bucket": (
        "encryption.defaultKmsKeyName",
        "GCS bucket has no default CMEK: set encryption.defaultKmsKeyName to the environment's Cloud KMS key.",
    ),
    "gcp:container/nodePool:NodePool": (
        "nodeConfig.bootDiskKmsKey",
        "GKE node pool boot disks use Google-managed keys: set nodeConfig.bootDiskKmsKey.",
    ),
    "gcp:artifactregistry/repository:Repository": (
        "kmsKeyName",
        "Artifact Registry repository has no CMEK: set kmsKeyName.",
    ),
    "gcp:compute/disk:Disk": (
        "diskEncryptionKey.kmsKeySelfLink",
        "Compute disk has no CMEK: set diskEncryptionKey.kmsKeySelfLink.",
    ),
    "gcp:logging/projectBucketConfig:ProjectBucketConfig": (
        "cmekSettings.kmsKeyName",
        "Log bucket has no CMEK: set cmekSettings.kmsKeyName.",
    ),
}


def _gcp(r: Resource) -> Iterator[str]:
    i = r.inputs
    if r.type in _GCP_KEY:
        path, message = _GCP_KEY[r.type]
        if _missing(get(i, path)):
            yield message
    elif r.type == "gcp:container/cluster:Cluster":
        if get(i, "databaseEncryption.state") != "ENCRYPTED" or _missing(
            get(i, "databaseEncryption.keyName")
        ):
            yield "GKE application-layer secrets encryption is off: set databaseEncryption={state: 'ENCRYPTED', keyName: <kms key>}."
        for n, pool in enumerate(as_list(get(i, "nodePools"))):  # inline pools: same field as NodePool
            if _missing(get(pool, "nodeConfig.bootDiskKmsKey")):
                yield f"nodePools[{n}] boot disks use Google-managed keys: set nodeConfig.bootDiskKmsKey."


def _azure(r: Resource) -> Iterator[str]:
    i = r.inputs
    if r.type == "azure-native:storage:StorageAccount":
        source = get(i, "encryption.keySource")
        if str(source).lower() != "microsoft.keyvault" or _missing(
            get(i, "encryption.keyVaultProperties.keyName")
        ):
            yield "Storage account is encrypted with Microsoft-managed keys: set encryption.keySource='Microsoft.Keyvault' and encryption.keyVaultProperties (keyName, keyVaultUri) with a user-assigned identity."
    elif r.type == "azure-native:containerregistry:Registry":
        if str(get(i, "encryption.status")).lower() != "enabled" or _missing(
            get(i, "encryption.keyVaultProperties.keyIdentifier")
        ):
            yield "Container registry has no customer-managed key: set encryption={status: 'enabled', keyVaultProperties: {keyIdentifier, identity}} (Premium SKU)."
    elif r.type == "azure-native:containerservice:ManagedCluster":
        if _missing(get(i, "diskEncryptionSetID")):
            yield "AKS node disks use platform keys: set diskEncryptionSetID to a disk encryption set backed by the environment's key."
        if not truthy(get(i, "securityProfile.azureKeyVaultKms.enabled")):
            yield "AKS secrets are not encrypted with Key Vault KMS: set securityProfile.azureKeyVaultKms={enabled: true, keyId: ...}."
    elif r.type == "azure-native:compute:Disk" and _missing(get(i, "encryption.diskEncryptionSetId")):
        yield "Managed disk has no disk encryption set: set encryption.diskEncryptionSetId."


STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
# The CSI drivers' StorageClass parameter that names the customer key for the volumes they create:
# aws-ebs-csi-driver docs/parameters.md (kmsKeyId, with encrypted="true"); GKE "Use customer-managed
# encryption keys" (disk-encryption-kms-key); azuredisk-csi-driver docs/driver-parameters.md (diskEncryptionSetID).
_CSI_KEY = {
    "ebs.csi.aws.com": "kmsKeyId",
    "pd.csi.storage.gke.io": "disk-encryption-kms-key",
    "disk.csi.azure.com": "diskEncryptionSetID",
}


def _storage_class(r: Resource) -> Iterator[str]:
    provisioner, params = get(r.inputs, "provisioner"), get(r.inputs, "parameters") or {}
    key = _CSI_KEY.get(provisioner) if isinstance(provisioner, str) else None
    if key is None:
        # A provisioner this rule does not know could write unencrypted volumes: say so, never assume.
        yield f"StorageClass provisioner {provisioner!r}: the pack knows how a customer key is set only for {sorted(_CSI_KEY)}; use one of them with its key parameter."
        return
    if provisioner == "ebs.csi.aws.com" and str(get(params, "encrypted")).lower() != "true":
        yield "StorageClass volumes are not encrypted: set parameters.encrypted='true' and parameters.kmsKeyId to the environment's KMS key ARN."
    elif _missing(get(params, key)):
        yield f"StorageClass volumes use the provider's key: set parameters.{key} to the environment's key."


ENCRYPTED_TYPES = types(
    STORAGE_CLASS,
    "aws:eks/cluster:Cluster",
    "aws:ecr/repository:Repository",
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:cloudtrail/trail:Trail",
    "aws:secretsmanager/secret:Secret",
    "aws:sns/topic:Topic",
    "aws:sqs/queue:Queue",
    "aws:ec2/launchTemplate:LaunchTemplate",
    "aws:eks/nodeGroup:NodeGroup",
    "aws:ebs/volume:Volume",
    S3_BUCKET,
    "gcp:storage/bucket:Bucket",
    "gcp:container/cluster:Cluster",
    "gcp:container/nodePool:NodePool",
    "gcp:artifactregistry/repository:Repository",
    "gcp:compute/disk:Disk",
    "gcp:logging/projectBucketConfig:ProjectBucketConfig",
    "azure-native:storage:StorageAccount",
    "azure-native:containerregistry:Registry",
    "azure-native:containerservice:ManagedCluster",
    "azure-native:compute:Disk",
)


def check_cmk(r: Resource, ctx: Context) -> Iterator[str]:
    if r.type == STORAGE_CLASS:
        yield from _storage_class(r)
        return
    yield from {"aws": _aws, "gcp": _gcp, "azure": _azure}.get(r.cloud, lambda _r: iter(()))(r)


def check_s3_cmk(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    configs = list(of_type(resources, S3_SSE))
    for bucket in of_type(resources, types(S3_BUCKET)):
        if get(bucket.inputs, "serverSideEncryptionConfiguration") is not None:
            continue  # the inline form is judged by encryption-at-rest-cmk
        mine = [c for c in configs if references(c, bucket, "bucket")]
        if not any(_sse_is_cmk(c.inputs) for c in mine):
            yield Finding(
                f"S3 bucket '{bucket.name}' has no BucketServerSideEncryptionConfiguration with "
                "sseAlgorithm='aws:kms' and the environment's kmsMasterKeyId (bucketKeyEnabled=True keeps "
                "KMS costs down).",
                bucket.urn,
            )


RULES = (
    Rule(
        name="encryption-at-rest-cmk",
        description="Buckets, disks (node disks and the cluster's PersistentVolumes), registries, cluster secrets and logs are encrypted with the environment's customer-managed key.",
        kind="resource",
        severity="high",
        enforcement="mandatory",
        remediation="Pass the environment's key (KMS key ARN / Cloud KMS key id / Key Vault key) to the resource's encryption setting named in the message.",
        url="https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html#customer-cmk",
        validate=check_cmk,
        applies_to=ENCRYPTED_TYPES,
    ),
    Rule(
        name="s3-bucket-cmk-encryption",
        description="Every S3 bucket has default encryption with the environment's KMS key (aws:kms).",
        kind="stack",
        severity="high",
        enforcement="mandatory",
        remediation="Add aws.s3.BucketServerSideEncryptionConfiguration(bucket=b.id, rules=[{apply_server_side_encryption_by_default: {sse_algorithm: 'aws:kms', kms_master_key_id: key.arn}, bucket_key_enabled: True}]).",
        url="https://www.pulumi.com/registry/packages/aws/api-docs/s3/bucketserversideencryptionconfiguration/",
        validate=check_s3_cmk,
        applies_to=types(S3_BUCKET, "aws:s3/bucketServerSideEncryptionConfiguration*"),
    ),
)
