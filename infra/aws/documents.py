"""AWS policy documents as pure functions: names/ARNs in, a JSON-ready dict out. No Pulumi here.

Rules they keep: no `*` action; no `*` resource except for the few actions AWS defines without resource
types (listed in `ACTIONS_WITHOUT_RESOURCE_TYPES`: AWS rejects any ARN there, so `*` is the only value
that works, and IAM analysers such as parliament do not flag them); key permissions name one key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from infra.shape import BUCKET_ACCESS, PREFIX_ACCESS, Access, accesses

Document = dict[str, Any]
VERSION = "2012-10-17"
# Auto Scaling launches the EKS node groups' instances under this service-linked role.
AUTOSCALING_SERVICE = "autoscaling.amazonaws.com"
AUTOSCALING_ROLE_NAME = "AWSServiceRoleForAutoScaling"

# IAM actions that take no resource ARN (Service Authorization Reference: "Resource types: (none)").
CLUSTER_AUTOSCALER_DESCRIBE = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeTags",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
)
# What the EBS CSI controller reads: zones, nodes, volumes and their modifications (resizes).
EBS_CSI_DESCRIBE = (
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeInstances",
    "ec2:DescribeVolumes",
    "ec2:DescribeVolumesModifications",
)
ACTIONS_WITHOUT_RESOURCE_TYPES = frozenset(
    {"ecr:GetAuthorizationToken", *CLUSTER_AUTOSCALER_DESCRIBE, *EBS_CSI_DESCRIBE}
)

_READ_OBJECT = ["s3:GetObject", "s3:GetObjectVersion"]
_WRITE_OBJECT = ["s3:PutObject", "s3:AbortMultipartUpload"]
_DELETE_OBJECT = ["s3:DeleteObject"]
_LIST_BUCKET = ["s3:ListBucket"]
_OBJECT_ACTIONS = {
    Access.READ: _READ_OBJECT,
    Access.WRITE: _WRITE_OBJECT,
    Access.READ_WRITE: _READ_OBJECT + _WRITE_OBJECT + _DELETE_OBJECT,
}
KMS_READ = ["kms:Decrypt"]
KMS_WRITE = ["kms:GenerateDataKey"]
ECR_PUSH = [
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:CompleteLayerUpload",
    "ecr:DescribeImages",
    "ecr:InitiateLayerUpload",
    "ecr:PutImage",
    "ecr:UploadLayerPart",
]
# Read an image over the registry API: its manifests (BatchGetImage) and its blobs (GetDownloadUrlForLayer
# answers a blob read with a signed S3 URL). Nothing that writes or lists.
ECR_PULL = ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]


def bucket_arn(name: str) -> str:
    return f"arn:aws:s3:::{name}"


def ecr_repository_arn(region: str, account_id: str, name: str) -> str:
    return f"arn:aws:ecr:{region}:{account_id}:repository/{name}"


def _statement(sid: str, actions: Iterable[str], resources: Iterable[str], **extra: Any) -> Document:
    return {"Sid": sid, "Effect": "Allow", "Action": sorted(actions), "Resource": sorted(resources), **extra}


def _sid(*parts: str) -> str:
    return "".join(p.replace("-", " ").title().replace(" ", "") for p in parts)


def bucket_statements(identity: str, bucket_names: Mapping[str, str]) -> list[Document]:
    """S3 statements for one identity, from `shape.BUCKET_ACCESS` (bucket purpose -> name)."""
    statements: list[Document] = []
    for purpose, access in sorted(BUCKET_ACCESS[identity].items()):
        arn = bucket_arn(bucket_names[purpose])
        actions = _OBJECT_ACTIONS[access]
        statements.append(_statement(_sid(purpose, "objects"), actions, [f"{arn}/*"]))
        if access is not Access.WRITE:
            statements.append(_statement(_sid(purpose, "list"), _LIST_BUCKET, [arn]))
    # Prefix grants (shape.PREFIX_ACCESS): objects under the prefix; listing limited to it (s3:prefix).
    for grant in PREFIX_ACCESS[identity]:
        arn = bucket_arn(bucket_names[grant.bucket])
        actions = _OBJECT_ACTIONS[grant.access]
        sid = _sid(grant.bucket, grant.prefix.strip("/"), grant.access.value)
        statements.append(_statement(sid, actions, [f"{arn}/{grant.prefix}*"]))
        if grant.access is not Access.WRITE:
            statements.append(
                _statement(
                    _sid(grant.bucket, grant.prefix.strip("/"), "list"),
                    _LIST_BUCKET,
                    [arn],
                    # s3fs asks for `inference` (no slash) when it checks that the "folder" exists.
                    Condition={"StringLike": {"s3:prefix": [grant.prefix.rstrip("/"), f"{grant.prefix}*"]}},
                )
            )
    return statements


def key_statement(identity: str, key_arn: str) -> Document | None:
    """KMS use of the environment key, only as far as the identity's bucket access needs it."""
    granted = accesses(identity)
    actions: set[str] = set()
    if granted & {Access.READ, Access.READ_WRITE}:
        actions.update(KMS_READ)
    if granted & {Access.WRITE, Access.READ_WRITE}:
        actions.update(KMS_WRITE)
    return _statement("EnvironmentKey", actions, [key_arn]) if actions else None


def ecr_push_statements(repository_arns: Iterable[str]) -> list[Document]:
    return [
        _statement("EcrLogin", ["ecr:GetAuthorizationToken"], ["*"]),
        _statement("EcrPush", ECR_PUSH, repository_arns),
    ]


def ecr_pull_statements(repository_arns: Iterable[str]) -> list[Document]:
    """Read-only use of the registry API (the pipeline's `images` step): the login token, whose action has no
    resource type (AWS accepts only `*`), and pulls from the named repositories only."""
    return [
        _statement("EcrLogin", ["ecr:GetAuthorizationToken"], ["*"]),
        _statement("EcrPull", ECR_PULL, repository_arns),
    ]


def policy(statements: Iterable[Document | None]) -> Document:
    return {"Version": VERSION, "Statement": [s for s in statements if s]}


def identity_policy(
    identity: str,
    bucket_names: Mapping[str, str],
    repository_arns: Iterable[str],
    pull_repository_arns: Iterable[str] = (),
) -> Document:
    """Everything an identity may do except key use (the key ARN is only known after creation).

    `repository_arns`: the repositories it pushes to (shape.IMAGE_PUSH); `pull_repository_arns`: those it
    only reads (shape.IMAGE_PULL)."""
    statements = bucket_statements(identity, bucket_names)
    repos, pulls = list(repository_arns), list(pull_repository_arns)
    if repos:
        statements += ecr_push_statements(repos)
    if pulls:  # one login statement, whichever kind of use needs it
        statements += [s for s in ecr_pull_statements(pulls) if not (repos and s["Sid"] == "EcrLogin")]
    return policy(statements)


def service_trust_policy(service: str) -> Document:
    return policy(
        [
            {
                "Sid": "ServiceAssumeRole",
                "Effect": "Allow",
                "Principal": {"Service": service},
                "Action": "sts:AssumeRole",
            }
        ]
    )


def pod_identity_trust_policy(account_id: str) -> Document:
    """EKS Pod Identity: the agent assumes the role on the pod's behalf and tags the session."""
    return policy(
        [
            {
                "Sid": "EksPodIdentity",
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
            }
        ]
    )


def tls_only_statement(bucket: str) -> Document:
    arn = bucket_arn(bucket)
    return {
        "Sid": "DenyInsecureTransport",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:*",
        "Resource": [arn, f"{arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }


def bucket_policy(bucket: str) -> Document:
    """Data buckets: TLS only. Access itself is granted by identity policies, never by the bucket."""
    return policy([tls_only_statement(bucket)])


def log_bucket_policy(
    bucket: str, account_id: str, source_buckets: Iterable[str], trail_arn: str
) -> Document:
    """The log bucket: TLS only, S3 server access logs from our buckets, CloudTrail from our trail."""
    arn = bucket_arn(bucket)
    return policy(
        [
            tls_only_statement(bucket),
            {
                "Sid": "S3ServerAccessLogs",
                "Effect": "Allow",
                "Principal": {"Service": "logging.s3.amazonaws.com"},
                "Action": "s3:PutObject",
                "Resource": f"{arn}/access/*",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account_id},
                    "ArnLike": {"aws:SourceArn": sorted(bucket_arn(b) for b in source_buckets)},
                },
            },
            {
                "Sid": "CloudTrailAclCheck",
                "Effect": "Allow",
                "Principal": {"Service": "cloudtrail.amazonaws.com"},
                "Action": "s3:GetBucketAcl",
                "Resource": arn,
                "Condition": {"StringEquals": {"aws:SourceArn": trail_arn}},
            },
            {
                "Sid": "CloudTrailWrite",
                "Effect": "Allow",
                "Principal": {"Service": "cloudtrail.amazonaws.com"},
                "Action": "s3:PutObject",
                "Resource": f"{arn}/cloudtrail/AWSLogs/{account_id}/*",
                "Condition": {
                    "StringEquals": {"s3:x-amz-acl": "bucket-owner-full-control", "aws:SourceArn": trail_arn}
                },
            },
        ]
    )


def role_arn(account_id: str, role: str) -> str:
    """`name` or `path/name` in the account -> the role's ARN (EKS access entries accept paths)."""
    return f"arn:aws:iam::{account_id}:role/{role}"


def autoscaling_role_arn(account_id: str) -> str:
    return f"arn:aws:iam::{account_id}:role/aws-service-role/{AUTOSCALING_SERVICE}/{AUTOSCALING_ROLE_NAME}"


def key_policy(account_id: str, region: str, trail_arn: str) -> Document:
    """The environment key's policy. In a key policy `"Resource": "*"` means "this key" (AWS requires it).

    The account administers the key through IAM; AWS services that write encrypted data for us
    (CloudTrail, CloudWatch Logs, S3 server access logging, Auto Scaling for node volumes) may use it,
    scoped to this account.
    """
    root = f"arn:aws:iam::{account_id}:root"
    autoscaling_role = autoscaling_role_arn(account_id)
    return policy(
        [
            {
                "Sid": "AccountAdministersThroughIam",
                "Effect": "Allow",
                "Principal": {"AWS": root},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                "Sid": "CloudTrailEncryptsLogs",
                "Effect": "Allow",
                "Principal": {"Service": "cloudtrail.amazonaws.com"},
                "Action": ["kms:DescribeKey", "kms:GenerateDataKey*"],
                "Resource": "*",
                "Condition": {
                    "StringEquals": {"aws:SourceArn": trail_arn},
                    "StringLike": {
                        "kms:EncryptionContext:aws:cloudtrail:arn": f"arn:aws:cloudtrail:*:{account_id}:trail/*"
                    },
                },
            },
            {
                "Sid": "CloudWatchLogsEncrypt",
                "Effect": "Allow",
                "Principal": {"Service": f"logs.{region}.amazonaws.com"},
                "Action": [
                    "kms:Decrypt",
                    "kms:DescribeKey",
                    "kms:Encrypt",
                    "kms:GenerateDataKey*",
                    "kms:ReEncrypt*",
                ],
                "Resource": "*",
                "Condition": {
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{region}:{account_id}:log-group:*"
                    }
                },
            },
            # EKS node groups launch through Auto Scaling; its service-linked role encrypts the nodes'
            # root volumes with this key (AWS's documented key-policy statements for encrypted EBS).
            {
                "Sid": "AutoScalingEncryptsNodeVolumes",
                "Effect": "Allow",
                "Principal": {"AWS": autoscaling_role},
                "Action": [
                    "kms:Decrypt",
                    "kms:DescribeKey",
                    "kms:Encrypt",
                    "kms:GenerateDataKey*",
                    "kms:ReEncrypt*",
                ],
                "Resource": "*",
            },
            {
                "Sid": "AutoScalingAttachesVolumes",
                "Effect": "Allow",
                "Principal": {"AWS": autoscaling_role},
                "Action": "kms:CreateGrant",
                "Resource": "*",
                "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
            },
            # CloudWatch alarms publish to the alerts topic, which is encrypted with this key (SNS
            # "compatibility between event sources from AWS services and encrypted topics").
            {
                "Sid": "CloudWatchAlarmsPublishToTopic",
                "Effect": "Allow",
                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
            },
            {
                "Sid": "S3AccessLogDelivery",
                "Effect": "Allow",
                "Principal": {"Service": "logging.s3.amazonaws.com"},
                "Action": ["kms:GenerateDataKey*"],
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
            },
        ]
    )
