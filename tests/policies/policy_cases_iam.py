"""Issue-12 mutants for IAM and key references: public principals, wildcards and admin roles per
cloud, and encryption keys that are AWS-managed, undeclared or of another project.

policy_cases.py gathers them with the other sections for test_policy_rules.py.
"""

from __future__ import annotations

from typing import Any

import policy_fixtures as fx
from policy_mutators import Case, add, doc, edit


def _aws_managed_key(i: dict[str, Any]) -> None:
    i["rules"][0]["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"] = "alias/aws/s3"


SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"

CASES: list[Case] = [
    # IAM classes
    (
        "aws-trust-anyone",
        fx.aws_stack,
        add(
            "aws:iam/role:Role",
            "open-role",
            {
                "assumeRolePolicy": doc(
                    {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}
                )
            },
        ),
        {("iam-no-public-principal", "open-role")},
    ),
    (
        "aws-trust-pinned-ok",
        fx.aws_stack,
        add(
            "aws:iam/role:Role",
            "ci-role",
            {
                "assumeRolePolicy": doc(
                    {
                        "Effect": "Allow",
                        "Principal": {
                            "Federated": "arn:aws:iam::111122223333:oidc-provider/token.actions.githubusercontent.com"
                        },
                        "Action": "sts:AssumeRoleWithWebIdentity",
                        "Condition": {
                            "StringEquals": {
                                "token.actions.githubusercontent.com:sub": "repo:acme/ml:ref:refs/heads/main",
                                "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
                            }
                        },
                    }
                )
            },
        ),
        set(),
    ),
    (
        "aws-sqs-policy-anyone",
        fx.aws_stack,
        add(
            "aws:sqs/queuePolicy:QueuePolicy",
            "events-policy",
            {
                "queueUrl": "https://sqs/q",
                "policy": doc(
                    {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": "*"}
                ),
            },
        ),
        {("iam-no-public-principal", "events-policy")},
    ),
    (
        "aws-partial-wildcard",
        fx.aws_stack,
        add(
            "aws:iam/policy:Policy",
            "writer",
            {
                "policy": doc(
                    {"Effect": "Allow", "Action": ["s3:Put*", "iam:*Role*"], "Resource": "arn:aws:s3:::b/*"}
                )
            },
        ),
        {("iam-no-wildcards", "writer")},
    ),
    (
        "aws-not-resource",
        fx.aws_stack,
        add(
            "aws:iam/policy:Policy",
            "reader",
            {
                "policy": doc(
                    {"Effect": "Allow", "Action": ["s3:GetObject"], "NotResource": "arn:aws:s3:::secret/*"}
                )
            },
        ),
        {("iam-no-wildcards", "reader")},
    ),
    (
        "aws-policy-unknown",
        fx.aws_stack,
        add("aws:iam/policy:Policy", "late", {"policy": fx.UNKNOWN}),
        {("iam-no-wildcards", "late?")},
    ),
    (
        "gcp-primitive-role-bucket-scope",
        fx.gcp_stack,
        add(
            "gcp:storage/bucketIAMMember:BucketIAMMember",
            "editor",
            {
                "bucket": "models",
                "role": "roles/editor",
                "member": "serviceAccount:x@p.iam.gserviceaccount.com",
            },
        ),
        {("iam-no-admin", "editor")},
    ),
    (
        "gcp-all-users-project",
        fx.gcp_stack,
        add(
            "gcp:projects/iAMMember:IAMMember",
            "public",
            {"project": "p", "role": "roles/storage.objectViewer", "member": "allUsers"},
        ),
        {("gcp-no-public-iam-members", "public")},
    ),
    (
        "azure-contributor-resource-group",
        fx.azure_stack,
        add(
            "azure-native:authorization:RoleAssignment",
            "trainer-contrib",
            {
                "principalId": "00000000-0000-0000-0000-000000000001",
                "principalType": "ServicePrincipal",
                "roleDefinitionId": "/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c",
                "scope": "/subscriptions/s/resourceGroups/ml",
            },
        ),
        {("iam-no-admin", "trainer-contrib")},
    ),
    # CMK references
    (
        "aws-managed-alias",
        fx.aws_stack,
        edit(SSE, "data-sse", _aws_managed_key),
        {("cmk-key-reference", "data-sse")},
    ),
    (
        "aws-undeclared-key",
        fx.aws_stack,
        add(
            "aws:cloudwatch/logGroup:LogGroup",
            "extra-logs",
            {"retentionInDays": 365.0, "kmsKeyId": "arn:aws:kms:eu-south-2:999999999999:key/other"},
        ),
        {("cmk-key-reference", "extra-logs")},
    ),
    (
        "aws-unknown-key-no-edge",
        fx.aws_stack,
        add(
            "aws:cloudwatch/logGroup:LogGroup",
            "extra-logs",
            {"retentionInDays": 365.0, "kmsKeyId": fx.UNKNOWN},
        ),
        {("cmk-key-reference", "extra-logs?")},
    ),
    (
        "gcp-key-of-another-project",
        fx.gcp_stack,
        edit(
            "gcp:storage/bucket:Bucket",
            "models",
            lambda i: i["encryption"].update(
                defaultKmsKeyName="projects/x/locations/eu/keyRings/r/cryptoKeys/foreign"
            ),
        ),
        {("cmk-key-reference", "models")},
    ),
]
