"""Versioning, lifecycle and access logging on the data, checkpoint and model buckets."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from .core import (
    Context,
    Finding,
    Resource,
    Rule,
    as_list,
    get,
    is_diagnostic_setting,
    is_unknown,
    of_type,
    references,
    types,
)
from .encryption import S3_BUCKET

GCS_BUCKET = "gcp:storage/bucket:Bucket"
AZ_ACCOUNT = "azure-native:storage:StorageAccount"
BUCKETS = types(S3_BUCKET, GCS_BUCKET, AZ_ACCOUNT)


def log_buckets(resources: Sequence[Resource]) -> set[str]:
    """URNs of buckets that receive access logs: they need no log of their own (it would loop)."""
    targets = [get(r.inputs, "targetBucket") for r in resources if r.type.startswith("aws:s3/bucketLogging")]
    targets += [get(r.inputs, "logging.logBucket") for r in resources if r.type == GCS_BUCKET]
    out = set()
    for b in of_type(resources, BUCKETS):
        names = {b.name, get(b.inputs, "bucket"), get(b.inputs, "name")}
        if any(isinstance(t, str) and t in names for t in targets) or "log" in b.name.lower().split("-"):
            out.add(b.urn)
    return out


def _companion(resources: Sequence[Resource], prefix: str, bucket: Resource, key: str) -> list[Resource]:
    return [r for r in resources if r.type.startswith(prefix) and references(r, bucket, key)]


def _stack_check(
    what: str,
    aws: Callable[[Sequence[Resource], Resource], bool | None],
    gcp: Callable[[Resource], bool | None],
    azure: Callable[[Sequence[Resource], Resource], bool | None],
    fix: str,
    skip_logs: bool = False,
) -> Callable[[Sequence[Resource], Context], Iterator[Finding]]:
    def check(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
        logs = log_buckets(resources) if skip_logs else set()
        for b in of_type(resources, BUCKETS):
            if b.urn in logs:
                continue
            ok = (
                aws(resources, b)
                if b.type == S3_BUCKET
                else gcp(b)
                if b.type == GCS_BUCKET
                else azure(resources, b)
            )
            if ok is False:
                yield Finding(f"{b.type.rsplit(':', 1)[-1]} '{b.name}' has no {what}: {fix}", b.urn)

    return check


def _aws_versioning(rs: Sequence[Resource], b: Resource) -> bool | None:
    if get(b.inputs, "versioning.enabled") is True:
        return True
    status = [
        get(v.inputs, "versioningConfiguration.status")
        for v in _companion(rs, "aws:s3/bucketVersioning", b, "bucket")
    ]
    return True if any(is_unknown(s) for s in status) else "Enabled" in status


def _gcs_versioning(b: Resource) -> bool | None:
    v = get(b.inputs, "versioning.enabled")
    return None if is_unknown(v) else v is True


def _azure_versioning(rs: Sequence[Resource], b: Resource) -> bool | None:
    props = _companion(rs, "azure-native:storage:BlobServiceProperties", b, "accountName")
    return any(get(p.inputs, "isVersioningEnabled") is True for p in props)


def _aws_lifecycle(rs: Sequence[Resource], b: Resource) -> bool | None:
    if as_list(get(b.inputs, "lifecycleRules")):
        return True
    return any(
        as_list(get(c.inputs, "rules"))
        for c in _companion(rs, "aws:s3/bucketLifecycleConfiguration", b, "bucket")
    )


def _gcs_lifecycle(b: Resource) -> bool | None:
    return bool(as_list(get(b.inputs, "lifecycleRules")))


def _azure_lifecycle(rs: Sequence[Resource], b: Resource) -> bool | None:
    return bool(_companion(rs, "azure-native:storage:ManagementPolicy", b, "accountName"))


def _aws_logging(rs: Sequence[Resource], b: Resource) -> bool | None:
    return get(b.inputs, "logging") is not None or bool(_companion(rs, "aws:s3/bucketLogging", b, "bucket"))


def _gcs_logging(b: Resource) -> bool | None:
    return get(b.inputs, "logging.logBucket") is not None


def _azure_logging(rs: Sequence[Resource], b: Resource) -> bool | None:
    return any(is_diagnostic_setting(r.type) and references(r, b, "resourceUri") for r in rs)


RULES = (
    Rule(
        name="bucket-versioning",
        description="Data, checkpoint and model buckets keep object versions (recovery from overwrite and ransomware).",
        kind="stack",
        severity="medium",
        enforcement="advisory",
        remediation="AWS: aws.s3.BucketVersioning(status='Enabled'). GCP: versioning={'enabled': True}. Azure: BlobServiceProperties(is_versioning_enabled=True).",
        url="https://docs.aws.amazon.com/AmazonS3/latest/userguide/Versioning.html",
        validate=_stack_check(
            "object versioning",
            _aws_versioning,
            _gcs_versioning,
            _azure_versioning,
            "enable versioning (AWS BucketVersioning status 'Enabled', GCS versioning.enabled, Azure BlobServiceProperties.isVersioningEnabled).",
        ),
        applies_to=types(
            S3_BUCKET,
            GCS_BUCKET,
            AZ_ACCOUNT,
            "aws:s3/bucketVersioning*",
            "azure-native:storage:BlobServiceProperties",
        ),
    ),
    Rule(
        name="bucket-lifecycle",
        description="Buckets expire old versions and objects by rule (storage limitation, cost).",
        kind="stack",
        severity="low",
        enforcement="advisory",
        remediation="AWS: aws.s3.BucketLifecycleConfiguration with noncurrent-version expiration. GCP: lifecycle_rules. Azure: storage ManagementPolicy.",
        url="https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lifecycle-mgmt.html",
        validate=_stack_check(
            "lifecycle rules",
            _aws_lifecycle,
            _gcs_lifecycle,
            _azure_lifecycle,
            "add lifecycle rules (AWS BucketLifecycleConfiguration, GCS lifecycleRules, Azure ManagementPolicy).",
        ),
        applies_to=types(
            S3_BUCKET,
            GCS_BUCKET,
            AZ_ACCOUNT,
            "aws:s3/bucketLifecycleConfiguration*",
            "azure-native:storage:ManagementPolicy",
        ),
    ),
    Rule(
        name="bucket-access-logging",
        description="Access to data buckets is logged (log buckets themselves excepted).",
        kind="stack",
        severity="medium",
        enforcement="advisory",
        remediation="AWS: aws.s3.BucketLogging to the environment's log bucket. GCP: logging={'log_bucket': ...}. Azure: a DiagnosticSetting on the account's blob service.",
        url="https://docs.aws.amazon.com/AmazonS3/latest/userguide/ServerLogs.html",
        validate=_stack_check(
            "access logging",
            _aws_logging,
            _gcs_logging,
            _azure_logging,
            "send access logs to the environment's log bucket/workspace.",
            skip_logs=True,
        ),
        applies_to=types(S3_BUCKET, GCS_BUCKET, AZ_ACCOUNT, "aws:s3/bucketLogging*"),
    ),
)
