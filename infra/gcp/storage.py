"""GCS buckets: CMEK, versioning, enforced public-access prevention, uniform access, lifecycle, logging."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig
from infra.gcp.keys import EnvironmentKey
from infra.naming import global_name, tags
from infra.shape import BUCKETS, RAW_SAMPLE_PREFIX

# GCS usage/storage logs are written by this Google group (documented by Cloud Storage).
ANALYTICS_WRITER = "group:cloud-storage-analytics@google.com"


def lifecycle_rules(cfg: PlatformConfig, purpose: str) -> list[gcp.storage.BucketLifecycleRuleArgs]:
    rule = gcp.storage.BucketLifecycleRuleArgs
    action = gcp.storage.BucketLifecycleRuleActionArgs
    condition = gcp.storage.BucketLifecycleRuleConditionArgs
    rules = [
        rule(action=action(type="AbortIncompleteMultipartUpload"), condition=condition(age=7)),
        rule(
            action=action(type="Delete"),
            condition=condition(
                days_since_noncurrent_time=cfg.noncurrent_version_expiry_days, with_state="ARCHIVED"
            ),
        ),
    ]
    if purpose == "checkpoints":
        rules.append(
            rule(
                action=action(type="Delete"),
                condition=condition(age=cfg.checkpoint_expiry_days, with_state="LIVE"),
            )
        )
    if purpose == "logs":
        rules.append(
            rule(
                action=action(type="Delete"),
                condition=condition(age=cfg.audit_retention_days, with_state="LIVE"),
            )
        )
        # The opt-in raw text sample: its own short retention, and no old versions kept beyond a day.
        raw = [RAW_SAMPLE_PREFIX]
        rules += [
            rule(
                action=action(type="Delete"),
                condition=condition(
                    age=cfg.monitoring.raw_retention_days, with_state="LIVE", matches_prefixes=raw
                ),
            ),
            rule(
                action=action(type="Delete"),
                condition=condition(
                    days_since_noncurrent_time=1, with_state="ARCHIVED", matches_prefixes=raw
                ),
            ),
        ]
    return rules


class Buckets(pulumi.ComponentResource):
    names: dict[str, str]
    uris: dict[str, str]
    buckets: dict[str, gcp.storage.Bucket]

    def __init__(
        self, name: str, cfg: PlatformConfig, *, key: EnvironmentKey, opts: pulumi.ResourceOptions
    ) -> None:
        super().__init__("eu-ml-platform:gcp:Buckets", name, None, opts)
        self.names = {purpose: global_name(cfg, purpose) for purpose in BUCKETS}
        self.buckets = {}
        for purpose in ["logs", *[p for p in BUCKETS if p != "logs"]]:
            depends: list[pulumi.Resource] = [*key.grants]
            if purpose != "logs":
                depends.append(self.buckets["logs"])
            self.buckets[purpose] = gcp.storage.Bucket(
                f"{name}-{purpose}",
                name=self.names[purpose],
                # Single region: data stays in the configured EU region.
                location=cfg.region.upper(),
                storage_class="STANDARD",
                uniform_bucket_level_access=True,
                public_access_prevention="enforced",
                versioning=gcp.storage.BucketVersioningArgs(enabled=True),
                encryption=gcp.storage.BucketEncryptionArgs(default_kms_key_name=key.key_name),
                lifecycle_rules=lifecycle_rules(cfg, purpose),
                logging=(
                    gcp.storage.BucketLoggingArgs(
                        log_bucket=self.names["logs"], log_object_prefix=f"access/{purpose}"
                    )
                    if purpose != "logs"
                    else None
                ),
                force_destroy=not cfg.is_prod and purpose not in ("logs", "models"),
                deletion_policy="PREVENT" if cfg.is_prod else "DELETE",
                labels=tags(cfg, purpose=purpose),
                opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
            )
        gcp.storage.BucketIAMMember(
            f"{name}-logs-analytics-writer",
            bucket=self.buckets["logs"].name,
            role="roles/storage.objectCreator",
            member=ANALYTICS_WRITER,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.uris = {purpose: f"gs://{bucket}" for purpose, bucket in self.names.items()}
        self.register_outputs({"uris": self.uris})
