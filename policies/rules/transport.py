"""Data in transit: TLS-only bucket policies, TLS 1.2 minimum, HTTPS only."""

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
    parse_json_document,
    references,
    types,
    undetermined,
)
from .encryption import S3_BUCKET

S3_POLICY = types("aws:s3/bucketPolicy:BucketPolicy")
TLS_OK = frozenset({"TLS1_2", "TLS1_3"})


def denies_insecure_transport(doc: dict[str, Any]) -> bool:
    """A Deny statement on aws:SecureTransport=false for every principal."""
    for st in as_list(doc.get("Statement")):
        if not isinstance(st, dict) or st.get("Effect") != "Deny":
            continue
        cond = get(st, "Condition.Bool") or {}
        if str(cond.get("aws:SecureTransport", "")).lower() == "false":
            return True
    return False


def check_s3_tls(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    policies = list(of_type(resources, S3_POLICY))
    for bucket in of_type(resources, types(S3_BUCKET)):
        mine = [p for p in policies if references(p, bucket, "bucket")]
        docs = [get(p.inputs, "policy") for p in mine]
        if any(is_unknown(d) for d in docs):
            yield Finding(
                undetermined(f"S3 bucket '{bucket.name}': its bucket policy is unknown at preview"),
                bucket.urn,
            )
            continue
        if not any(denies_insecure_transport(parse_json_document(d) or {}) for d in docs):
            yield Finding(
                f"S3 bucket '{bucket.name}' accepts plain HTTP: attach a BucketPolicy with a Deny statement on "
                "Condition {Bool: {aws:SecureTransport: 'false'}} for s3:* on the bucket and its objects.",
                bucket.urn,
            )


def check_min_tls(r: Resource, ctx: Context) -> Iterator[str]:
    tls = get(r.inputs, "minimumTlsVersion")
    if is_unknown(tls):
        yield undetermined("minimumTlsVersion is unknown at preview")
    elif tls not in TLS_OK:
        yield f"minimumTlsVersion is {tls!r}: set it to 'TLS1_2'."
    if get(r.inputs, "enableHttpsTrafficOnly") is False:
        yield "enableHttpsTrafficOnly is False: remove it or set it to True."


RULES = (
    Rule(
        name="s3-bucket-tls-only",
        description="Every S3 bucket's policy denies requests that do not use TLS.",
        kind="stack",
        severity="high",
        enforcement="mandatory",
        remediation="Add a BucketPolicy statement {Effect: Deny, Principal: '*', Action: 's3:*', Resource: [arn, arn/*], Condition: {Bool: {'aws:SecureTransport': 'false'}}}.",
        url="https://docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html#transit",
        validate=check_s3_tls,
        applies_to=types(S3_BUCKET, "aws:s3/bucketPolicy:BucketPolicy"),
    ),
    Rule(
        name="storage-min-tls-https-only",
        description="Azure storage accepts HTTPS only, with TLS 1.2 or newer.",
        kind="resource",
        severity="high",
        enforcement="mandatory",
        remediation="Set minimum_tls_version='TLS1_2' and enable_https_traffic_only=True on azure_native.storage.StorageAccount.",
        url="https://learn.microsoft.com/en-us/azure/storage/common/transport-layer-security-configure-minimum-version",
        validate=check_min_tls,
        applies_to=types("azure-native:storage:StorageAccount"),
    ),
)
