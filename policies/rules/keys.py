"""Customer-managed key references point at a key this stack declares (or an allow-listed external key).

encryption-at-rest-cmk checks that a key is configured; this stack rule checks *which* key: never an
AWS-managed alias (`alias/aws/s3`) or a provider default, and never a key nobody reviewed. A value
unknown at preview is resolved through the dependency edge the engine records when the value flows
from a declared key's output; without such an edge the check is undetermined.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .core import Context, Finding, Resource, Rule, as_list, get, is_unknown, types, undetermined

KEY_TYPES = types(
    "aws:kms/key:Key",
    "aws:kms/replicaKey:ReplicaKey",
    "gcp:kms/cryptoKey:CryptoKey",
    "azure-native:keyvault:Key",
    "azure-native:keyvault:Vault",
    "azure-native:compute:DiskEncryptionSet",
)
# (type, dotted path; `[]` walks a list) of every key reference the encryption rules accept.
KEY_REFERENCES: dict[str, tuple[str, ...]] = {
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        "rules[].applyServerSideEncryptionByDefault.kmsMasterKeyId",
    ),
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2": (
        "rules[].applyServerSideEncryptionByDefault.kmsMasterKeyId",
    ),
    "aws:cloudwatch/logGroup:LogGroup": ("kmsKeyId",),
    "aws:cloudtrail/trail:Trail": ("kmsKeyId",),
    "aws:secretsmanager/secret:Secret": ("kmsKeyId",),
    "aws:sns/topic:Topic": ("kmsMasterKeyId",),
    "aws:sqs/queue:Queue": ("kmsMasterKeyId",),
    "aws:ecr/repository:Repository": ("encryptionConfigurations[].kmsKey",),
    "aws:eks/cluster:Cluster": ("encryptionConfig.provider.keyArn",),
    "aws:ec2/launchTemplate:LaunchTemplate": ("blockDeviceMappings[].ebs.kmsKeyId",),
    "aws:ebs/volume:Volume": ("kmsKeyId",),
    "gcp:storage/bucket:Bucket": ("encryption.defaultKmsKeyName",),
    "gcp:container/nodePool:NodePool": ("nodeConfig.bootDiskKmsKey",),
    "gcp:container/cluster:Cluster": ("databaseEncryption.keyName", "nodePools[].nodeConfig.bootDiskKmsKey"),
    "gcp:artifactregistry/repository:Repository": ("kmsKeyName",),
    "gcp:compute/disk:Disk": ("diskEncryptionKey.kmsKeySelfLink",),
    "gcp:logging/projectBucketConfig:ProjectBucketConfig": ("cmekSettings.kmsKeyName",),
    "azure-native:storage:StorageAccount": ("encryption.keyVaultProperties.keyName",),
    "azure-native:containerregistry:Registry": ("encryption.keyVaultProperties.keyIdentifier",),
    "azure-native:containerservice:ManagedCluster": (
        "securityProfile.azureKeyVaultKms.keyId",
        "diskEncryptionSetID",
    ),
    # The CSI drivers' key parameters (encryption.py, `_CSI_KEY`): the volumes of the cluster's PVCs.
    "kubernetes:storage.k8s.io/v1:StorageClass": (
        "parameters.kmsKeyId",
        "parameters.disk-encryption-kms-key",
        "parameters.diskEncryptionSetID",
    ),
}
# Keys the provider manages, whatever the account: never a customer-managed key.
MANAGED_MARKERS = ("alias/aws/", "google-managed", "microsoft.storage")


def values_at(data: Any, path: str) -> list[Any]:
    """Every value at a dotted path where `name[]` walks each element of a list."""
    cur = [data]
    for part in path.split("."):
        nxt: list[Any] = []
        for node in cur:
            if is_unknown(node):
                nxt.append(node)
                continue
            key, walk = (part[:-2], True) if part.endswith("[]") else (part, False)
            v = get(node, key)
            if v is None:
                continue
            nxt += as_list(v) if walk and not is_unknown(v) else [v]
        cur = nxt
    return cur


def _names(key: Resource) -> set[str]:
    names = {key.name}
    for k in ("name", "keyName"):
        v = key.inputs.get(k)
        if isinstance(v, str) and not is_unknown(v):
            names.add(v)
    return names


def check_references(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    keys = [r for r in resources if KEY_TYPES(r.type)]
    key_urns = {k.urn for k in keys}
    declared = set().union(*(_names(k) for k in keys)) if keys else set()
    allowed = {str(x) for x in as_list(ctx.setting("allowedExternalKeys", []))}
    for r in resources:
        for path in KEY_REFERENCES.get(r.type, ()):
            for value in values_at(r.inputs, path):
                flows_from_key = bool(key_urns & set(r.dependencies))
                if is_unknown(value):
                    if not flows_from_key:
                        yield Finding(
                            undetermined(f"{path} is unknown at preview and depends on no key of this stack"),
                            r.urn,
                        )
                    continue
                text = str(value)
                if any(m in text.lower() for m in MANAGED_MARKERS):
                    yield Finding(
                        f"{path}={text!r} is a provider-managed key: point it at the environment's "
                        "customer-managed key declared in this stack.",
                        r.urn,
                    )
                elif not (flows_from_key or text in allowed or text.rsplit("/", 1)[-1] in declared):
                    yield Finding(
                        f"{path}={text!r} names no key declared in this stack: reference the stack's key "
                        "(its output), or add the external key to allowedExternalKeys after review.",
                        r.urn,
                    )


RULES = (
    Rule(
        name="cmk-key-reference",
        description="Customer-managed key references point at a key declared in the stack or an allow-listed external key, never a provider-managed one.",
        kind="stack",
        severity="high",
        enforcement="mandatory",
        remediation="Pass the stack's key output (key.arn, crypto_key.id, key vault key) instead of a literal, an alias/aws/* alias or a default; list reviewed external keys in allowedExternalKeys.",
        url="https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html#key-mgmt",
        validate=check_references,
        applies_to=lambda t: t in KEY_REFERENCES or KEY_TYPES(t),
        config_schema={"allowedExternalKeys": {"type": "array", "items": {"type": "string"}}},
    ),
)
