"""Encryption at rest with the environment's customer-managed key, and key hygiene."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from .core import (
    Context,
    Finding,
    Resource,
    Rule,
    as_list,
    as_number,
    get,
    is_unknown,
    of_type,
    parse_json_document,
    references,
    truthy,
    types,
    undetermined,
)

MAX_ROTATION_DAYS = 90
# AWS allows 7-30 days; 30 leaves time to notice a scheduled deletion before prod data is lost.
# Non-prod stacks are torn down and rebuilt, so they may use the 7-day minimum (infra does).
MIN_DELETION_WINDOW_DAYS = 30
MIN_DELETION_WINDOW_DAYS_NON_PROD = 7

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


ENCRYPTED_TYPES = types(
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


# --- key hygiene --------------------------------------------------------------------------------

_DURATION = re.compile(r"^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?$")


def iso_days(value: str) -> float | None:
    """'P90D' -> 90, 'P3M' -> 90, '7776000s' (GCP) -> 90."""
    if value.endswith("s") and value[:-1].replace(".", "", 1).isdigit():
        return float(value[:-1]) / 86400
    m = _DURATION.match(value.split("T", 1)[0])
    if not m:
        return None
    y, mo, w, d = (int(g) if g else 0 for g in m.groups())
    return y * 365 + mo * 30 + w * 7 + d


KEY_TYPES = types(
    "aws:kms/key:Key",
    "gcp:kms/cryptoKey:CryptoKey",
    "azure-native:keyvault:Key",
    "azure-native:keyvault:Vault",
)


def check_rotation(r: Resource, ctx: Context) -> Iterator[str]:
    i = r.inputs
    limit = float(ctx.setting("maxRotationDays", MAX_ROTATION_DAYS))
    if r.type == "aws:kms/key:Key":
        if is_unknown(get(i, "enableKeyRotation")) or is_unknown(get(i, "rotationPeriodInDays")):
            yield undetermined("enableKeyRotation or rotationPeriodInDays is unknown at preview")
            return
        if get(i, "enableKeyRotation") is not True:
            yield "KMS key rotation is off: set enableKeyRotation=True."
            return
        days = as_number(get(i, "rotationPeriodInDays"))
        if days is None:
            yield f"KMS key rotates every 365 days (the default): set rotationPeriodInDays<={limit:g}."
        elif days is not None and days > limit:
            yield f"KMS key rotationPeriodInDays={days:g} exceeds {limit:g}."
    elif r.type == "gcp:kms/cryptoKey:CryptoKey":
        period = get(i, "rotationPeriod")
        if is_unknown(period):
            yield undetermined("rotationPeriod is unknown at preview")
            return
        days = iso_days(period) if isinstance(period, str) else None
        if days is None or days > limit:
            yield f"Cloud KMS key rotationPeriod={period!r}: set it to at most '{int(limit * 86400)}s' ({limit:g} days)."
    elif r.type == "azure-native:keyvault:Key":
        actions = as_list(get(i, "properties.rotationPolicy.lifetimeActions"))
        rotate = [a for a in actions if str(get(a, "action.type")).lower() == "rotate"]
        after = [get(a, "trigger.timeAfterCreate") for a in rotate]
        ok = any(is_unknown(t) or (isinstance(t, str) and (iso_days(t) or 1e9) <= limit) for t in after)
        if not ok:
            yield f"Key Vault key has no rotation policy rotating within {limit:g} days: add properties.rotationPolicy.lifetimeActions=[{{action: {{type: 'rotate'}}, trigger: {{timeAfterCreate: 'P90D'}}}}]."


def min_deletion_window(ctx: Context) -> float:
    default = (
        MIN_DELETION_WINDOW_DAYS if ctx.environment in (None, "prod") else MIN_DELETION_WINDOW_DAYS_NON_PROD
    )
    return float(ctx.setting("minDeletionWindowDays", default))


def check_deletion_protection(r: Resource, ctx: Context) -> Iterator[str]:
    i = r.inputs
    need = min_deletion_window(ctx)
    if r.type == "aws:kms/key:Key":
        days = as_number(get(i, "deletionWindowInDays"))
        if days is not None and days < need:
            yield f"KMS key deletionWindowInDays={days:g} in {ctx.environment or 'this stack'}: set it to at least {need:g} so a scheduled deletion can be noticed and cancelled."
    elif r.type == "gcp:kms/cryptoKey:CryptoKey":
        dur = get(i, "destroyScheduledDuration")
        days = iso_days(dur) if isinstance(dur, str) and not is_unknown(dur) else None
        if days is not None and days < need:
            yield f"Cloud KMS key destroyScheduledDuration={dur!r}: set it to at least '{int(need * 86400)}s' ({need:g} days)."
    elif r.type == "azure-native:keyvault:Vault":
        if is_unknown(get(i, "properties.enablePurgeProtection")):
            yield undetermined("properties.enablePurgeProtection is unknown at preview")
        elif get(i, "properties.enablePurgeProtection") is not True:
            yield "Key Vault purge protection is off: set properties.enablePurgeProtection=True (it cannot be turned off later)."
        if get(i, "properties.enableSoftDelete") is False:
            yield "Key Vault soft delete is off: remove enableSoftDelete=False."


def wildcard_principals(doc: dict[str, Any]) -> list[str]:
    """Allow statements granting to '*' without a Condition (anyone, any account)."""
    found = []
    for n, st in enumerate(as_list(doc.get("Statement"))):
        if not isinstance(st, dict) or st.get("Effect") != "Allow" or st.get("Condition"):
            continue
        principal = st.get("Principal")
        values = (
            [principal]
            if isinstance(principal, str)
            else [v for vs in (principal or {}).values() for v in as_list(vs)]
            if isinstance(principal, dict)
            else []
        )
        if "*" in values:
            found.append(st.get("Sid") or f"Statement[{n}]")
    return found


def check_key_policy(r: Resource, ctx: Context) -> Iterator[str]:
    if is_unknown(get(r.inputs, "policy")):
        yield undetermined("the key policy is unknown at preview")
        return
    doc = parse_json_document(get(r.inputs, "policy"))
    if doc is None:
        return
    for sid in wildcard_principals(doc):
        yield f"Key policy statement {sid} allows Principal '*' without a Condition: name the account root, roles or services instead."


RULES = (
    Rule(
        name="encryption-at-rest-cmk",
        description="Buckets, disks, registries, cluster secrets and logs are encrypted with the environment's customer-managed key.",
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
    Rule(
        name="kms-key-rotation",
        description=f"Customer-managed keys rotate automatically at least every {MAX_ROTATION_DAYS} days.",
        kind="resource",
        severity="high",
        enforcement="mandatory",
        remediation="AWS: enable_key_rotation=True, rotation_period_in_days=90. GCP: rotation_period='7776000s'. Azure: a rotation policy with timeAfterCreate 'P90D'.",
        url="https://docs.aws.amazon.com/kms/latest/developerguide/rotate-keys.html",
        validate=check_rotation,
        applies_to=types("aws:kms/key:Key", "gcp:kms/cryptoKey:CryptoKey", "azure-native:keyvault:Key"),
        config_schema={"maxRotationDays": {"type": "number"}},
    ),
    Rule(
        name="kms-key-deletion-protection",
        description="Keys cannot be destroyed at once: a 30-day deletion window in prod (7 elsewhere), purge protection on.",
        kind="resource",
        severity="high",
        enforcement="mandatory",
        remediation="AWS: deletion_window_in_days=30. GCP: destroy_scheduled_duration >= '2592000s'. Azure: enable_purge_protection=True on the vault.",
        url="https://learn.microsoft.com/en-us/azure/key-vault/general/soft-delete-overview",
        validate=check_deletion_protection,
        applies_to=types("aws:kms/key:Key", "gcp:kms/cryptoKey:CryptoKey", "azure-native:keyvault:Vault"),
        config_schema={"minDeletionWindowDays": {"type": "number"}, "environment": {"type": "string"}},
    ),
    Rule(
        name="kms-key-policy-no-wildcard-principal",
        description="Key policies grant no permission to the wildcard principal '*'.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Replace Principal '*' with the account root (arn:aws:iam::<account>:root) and the roles that use the key, or add a Condition such as aws:PrincipalAccount.",
        url="https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-overview.html",
        validate=check_key_policy,
        applies_to=types("aws:kms/key:Key", "aws:kms/keyPolicy:KeyPolicy"),
    ),
)
