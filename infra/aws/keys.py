"""The environment's customer-managed KMS key (rotated on the configured period), and the Auto Scaling
service-linked role its policy names."""

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
        assert cfg.aws is not None  # config.parse requires the aws section on aws stacks
        # The key policy lets Auto Scaling's service-linked role encrypt node volumes, and KMS refuses a
        # policy naming a principal that does not exist (MalformedPolicyDocumentException). A fresh
        # account has no such role until its first Auto Scaling group: declare it, and create the key
        # after it. The role is account-wide: destroying this stack leaves it (infra/lifecycle.py retains it).
        after: list[pulumi.Resource] = []
        if cfg.aws.auto_scaling_service_linked_role == "create":
            after.append(
                aws.iam.ServiceLinkedRole(
                    f"{name}-autoscaling-role",
                    aws_service_name=documents.AUTOSCALING_SERVICE,
                    tags=tags(cfg),
                    opts=pulumi.ResourceOptions(parent=self),
                )
            )
        else:
            # Fails the preview with "role not found" before any resource, instead of the key later.
            aws.iam.get_role(name=documents.AUTOSCALING_ROLE_NAME, opts=pulumi.InvokeOptions(parent=self))
        self.key = aws.kms.Key(
            f"{name}-key",
            description=f"{cfg.name}: data, images, Kubernetes secrets and audit logs",
            enable_key_rotation=True,
            # AWS accepts 90..2560 days (config.limits, botocore); the config caps it at 90 for every cloud.
            rotation_period_in_days=cfg.key_rotation_days,
            deletion_window_in_days=30 if cfg.is_prod else 7,
            policy=json.dumps(documents.key_policy(account_id, cfg.region, trail_arn)),
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self, depends_on=after),
        )
        self.alias = aws.kms.Alias(
            f"{name}-alias",
            name=f"alias/{cfg.name}",
            target_key_id=self.key.key_id,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.arn = self.key.arn
        self.register_outputs({"arn": self.arn})
