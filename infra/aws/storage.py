"""S3 buckets: KMS-encrypted, versioned, private, TLS-only, with lifecycle rules and access logging."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from infra.aws import documents
from infra.config import PlatformConfig
from infra.naming import global_name, tags
from infra.shape import BUCKETS, RAW_SAMPLE_PREFIX

ACCESS_LOG_PREFIX = "access/"


class SecureBucket(pulumi.ComponentResource):
    """A bucket and the separate v7 configuration resources that make it safe."""

    bucket: aws.s3.Bucket

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        bucket_name: str,
        purpose: str,
        key_arn: pulumi.Input[str],
        policy: pulumi.Input[str],
        log_bucket: pulumi.Input[str] | None,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:aws:SecureBucket", name, None, opts)
        # The settings below are resources of their own, which the bucket's `protect` does not cover:
        # infra/lifecycle.py protects and retains each in prod.
        child = pulumi.ResourceOptions(parent=self)
        self.bucket = aws.s3.Bucket(
            name,
            bucket=bucket_name,
            force_destroy=not cfg.is_prod and purpose not in ("logs", "models"),
            tags=tags(cfg, purpose=purpose),
            opts=child,
        )
        bucket_id = self.bucket.id
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket_id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        public_access = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=bucket_id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket_id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=bucket_id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms", kms_master_key_id=key_arn
                    ),
                    # Bucket keys cut KMS requests (and cost) by ~99% for object-heavy buckets.
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        # A public-access block must exist before a policy, or S3 may briefly evaluate a policy without it.
        aws.s3.BucketPolicy(
            f"{name}-policy",
            bucket=bucket_id,
            policy=policy,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[public_access])),
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle", bucket=bucket_id, rules=lifecycle_rules(cfg, purpose), opts=child
        )
        if log_bucket is not None:
            aws.s3.BucketLogging(
                f"{name}-logging",
                bucket=bucket_id,
                target_bucket=log_bucket,
                target_prefix=f"{ACCESS_LOG_PREFIX}{bucket_name}/",
                opts=child,
            )
        self.register_outputs({"bucket": self.bucket.bucket})


def lifecycle_rules(cfg: PlatformConfig, purpose: str) -> list[aws.s3.BucketLifecycleConfigurationRuleArgs]:
    rules = [
        aws.s3.BucketLifecycleConfigurationRuleArgs(
            id="abort-incomplete-multipart",
            status="Enabled",
            filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
            abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                days_after_initiation=7
            ),
        ),
        aws.s3.BucketLifecycleConfigurationRuleArgs(
            id="expire-noncurrent-versions",
            status="Enabled",
            filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
            noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                noncurrent_days=cfg.noncurrent_version_expiry_days
            ),
        ),
    ]
    # Current objects expire only where the data is disposable by design.
    expiry = {
        "checkpoints": ("expire-old-checkpoints", cfg.checkpoint_expiry_days),
        "logs": ("expire-logs-after-retention", cfg.audit_retention_days),
    }
    if purpose in expiry:
        rule_id, days = expiry[purpose]
        rules.append(
            aws.s3.BucketLifecycleConfigurationRuleArgs(
                id=rule_id,
                status="Enabled",
                filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=days),
            )
        )
    if purpose == "logs":
        # The opt-in raw text sample keeps its own short retention (S3 applies the shorter of two
        # overlapping expirations), and its old versions go a day later instead of after 30.
        rules.append(
            aws.s3.BucketLifecycleConfigurationRuleArgs(
                id="expire-raw-sample",
                status="Enabled",
                filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=RAW_SAMPLE_PREFIX),
                expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(
                    days=cfg.monitoring.raw_retention_days
                ),
                noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                    noncurrent_days=1
                ),
            )
        )
    return rules


class Buckets(pulumi.ComponentResource):
    """The five buckets; every data bucket logs to `logs`, which also receives CloudTrail."""

    names: Mapping[str, str]
    buckets: dict[str, SecureBucket]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        key_arn: pulumi.Input[str],
        account_id: str,
        trail_arn: str,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:aws:Buckets", name, None, opts)
        self.names = {purpose: global_name(cfg, purpose) for purpose in BUCKETS}
        sources = [self.names[p] for p in BUCKETS if p != "logs"]
        log_policy = documents.log_bucket_policy(self.names["logs"], account_id, sources, trail_arn)
        self.buckets = {}
        logs = SecureBucket(
            f"{name}-logs",
            cfg,
            bucket_name=self.names["logs"],
            purpose="logs",
            key_arn=key_arn,
            policy=json.dumps(log_policy),
            log_bucket=None,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.buckets["logs"] = logs
        for purpose in BUCKETS:
            if purpose == "logs":
                continue
            self.buckets[purpose] = SecureBucket(
                f"{name}-{purpose}",
                cfg,
                bucket_name=self.names[purpose],
                purpose=purpose,
                key_arn=key_arn,
                policy=json.dumps(documents.bucket_policy(self.names[purpose])),
                log_bucket=logs.bucket.bucket,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.uris = {purpose: f"s3://{bucket}" for purpose, bucket in self.names.items()}
        self.register_outputs({"uris": self.uris})
