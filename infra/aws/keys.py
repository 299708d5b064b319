"""The environment's customer-managed KMS key (rotated yearly by AWS, or on the configured period)."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from infra.aws import documents
from infra.config import PlatformConfig
from infra.naming import tags


class EnvironmentKey(pulumi.ComponentResource):
    """One symmetric key per environment: buckets, ECR, EKS secrets, CloudTrail and logs use it."""

    key: aws.kms.Key
    arn: pulumi.Output[str]

    def __init__(
        self, name: str, cfg: PlatformConfig, account_id: str, trail_arn: str, opts: pulumi.ResourceOptions
    ) -> None:
        super().__init__("eu-ml-platform:aws:EnvironmentKey", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, protect=cfg.is_prod)
        self.key = aws.kms.Key(
            f"{name}-key",
            description=f"{cfg.name}: data, images, Kubernetes secrets and audit logs",
            enable_key_rotation=True,
            # AWS accepts 90..2560 days; the config caps it at 90 for every cloud.
            rotation_period_in_days=cfg.key_rotation_days,
            deletion_window_in_days=30 if cfg.is_prod else 7,
            policy=json.dumps(documents.key_policy(account_id, cfg.region, trail_arn)),
            tags=tags(cfg),
            opts=child,
        )
        self.alias = aws.kms.Alias(
            f"{name}-alias",
            name=f"alias/{cfg.name}",
            target_key_id=self.key.key_id,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.arn = self.key.arn
        self.register_outputs({"arn": self.arn})
