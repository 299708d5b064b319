"""AWS side of the CI trust: GitHub's OIDC provider, one role per identity, and the self-managed
EU state backend (a versioned, KMS-encrypted, private S3 bucket + the key Pulumi encrypts
secrets with: `pulumi login s3://<bucket>` and `--secrets-provider awskms://<alias>`)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.bootstrap import github

# Read-only for previews: AWS's managed ReadOnlyAccess (a preview reads every resource type).
READ_ONLY = "arn:aws:iam::aws:policy/ReadOnlyAccess"
# Deploy: create/update/delete the platform's resources; IAM is scoped below to the platform's path.
POWER_USER = "arn:aws:iam::aws:policy/PowerUserAccess"


@dataclass(frozen=True, kw_only=True, slots=True)
class AwsBootstrapArgs:
    name: str
    """Platform name: prefixes every resource and the ECR repositories (`<name>/<image>`)."""
    repository: str
    """GitHub `<owner>/<repo>` trusted."""
    environments: tuple[str, ...]
    account_id: str
    region: str


def ecr_push_policy(repository_arns: list[str]) -> str:
    """Push to the platform's repositories only; GetAuthorizationToken has no resource scope."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "Login", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
                {
                    "Sid": "Push",
                    "Effect": "Allow",
                    "Action": [
                        "ecr:BatchCheckLayerAvailability",
                        "ecr:BatchGetImage",
                        "ecr:CompleteLayerUpload",
                        "ecr:DescribeImages",
                        "ecr:GetDownloadUrlForLayer",
                        "ecr:InitiateLayerUpload",
                        "ecr:PutImage",
                        "ecr:UploadLayerPart",
                    ],
                    "Resource": repository_arns,
                },
            ],
        },
        sort_keys=True,
    )


def iam_scoped_policy(account_id: str, name: str) -> str:
    """PowerUserAccess has no IAM: the deploy role may manage the platform's own roles only."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "PlatformRoles",
                    "Effect": "Allow",
                    "Action": [
                        "iam:*Role*",
                        "iam:*RolePolicy*",
                        "iam:*InstanceProfile*",
                        "iam:*OpenIDConnectProvider*",
                    ],
                    "Resource": [
                        f"arn:aws:iam::{account_id}:role/{name}-*",
                        f"arn:aws:iam::{account_id}:instance-profile/{name}-*",
                        f"arn:aws:iam::{account_id}:oidc-provider/*",
                    ],
                },
                {
                    "Sid": "PassPlatformRoles",
                    "Effect": "Allow",
                    "Action": "iam:PassRole",
                    "Resource": f"arn:aws:iam::{account_id}:role/{name}-*",
                },
            ],
        },
        sort_keys=True,
    )


def _trust(provider_arn: str, *, subject: str) -> str:
    return github.aws_trust_policy(provider_arn, subject)


class AwsBootstrap(pulumi.ComponentResource):
    role_arns: dict[str, pulumi.Output[str]]
    state_bucket: pulumi.Output[str]
    secrets_key_alias: str

    def __init__(self, name: str, args: AwsBootstrapArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eu-ml-platform:bootstrap:Aws", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        provider = aws.iam.OpenIdConnectProvider(
            f"{name}-github", url=github.ISSUER, client_id_lists=[github.AWS_AUDIENCE], opts=child
        )
        repos = [
            f"arn:aws:ecr:{args.region}:{args.account_id}:repository/{args.name}/{i}"
            for i in ("training", "serving")
        ]
        self.role_arns = {}
        for ident in github.identities(args.repository, args.environments):
            role = aws.iam.Role(
                f"{name}-{ident.name}",
                name=f"{args.name}-ci-{ident.name}",
                assume_role_policy=provider.arn.apply(functools.partial(_trust, subject=ident.subject)),
                max_session_duration=3600,
                tags={"ci-identity": ident.role},
                opts=child,
            )
            if ident.role == "read":
                aws.iam.RolePolicyAttachment(
                    f"{name}-{ident.name}-read", role=role.name, policy_arn=READ_ONLY, opts=child
                )
            elif ident.role == "push":
                aws.iam.RolePolicy(
                    f"{name}-{ident.name}-ecr", role=role.id, policy=ecr_push_policy(repos), opts=child
                )
            else:
                aws.iam.RolePolicyAttachment(
                    f"{name}-{ident.name}-power", role=role.name, policy_arn=POWER_USER, opts=child
                )
                aws.iam.RolePolicy(
                    f"{name}-{ident.name}-iam",
                    role=role.id,
                    policy=iam_scoped_policy(args.account_id, args.name),
                    opts=child,
                )
            self.role_arns[ident.name] = role.arn
        # The state backend: in the EU region of the platform, versioned, private, KMS-encrypted.
        key = aws.kms.Key(
            f"{name}-state", description="Pulumi state and secrets", enable_key_rotation=True, opts=child
        )
        self.secrets_key_alias = f"alias/{args.name}-pulumi"
        aws.kms.Alias(f"{name}-state", name=self.secrets_key_alias, target_key_id=key.key_id, opts=child)
        bucket = aws.s3.Bucket(
            f"{name}-state", bucket=f"{args.name}-pulumi-state-{args.account_id}", opts=child
        )
        aws.s3.BucketVersioning(
            f"{name}-state", bucket=bucket.id, versioning_configuration={"status": "Enabled"}, opts=child
        )
        aws.s3.BucketPublicAccessBlock(
            f"{name}-state",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-state",
            bucket=bucket.id,
            rules=[
                {
                    "apply_server_side_encryption_by_default": {
                        "sse_algorithm": "aws:kms",
                        "kms_master_key_id": key.arn,
                    },
                    "bucket_key_enabled": True,
                }
            ],
            opts=child,
        )
        self.state_bucket = bucket.bucket
        self.register_outputs({"role_arns": self.role_arns, "state_bucket": self.state_bucket})
