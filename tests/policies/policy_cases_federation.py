"""Issue-12 mutants for CI identity federation (GitHub OIDC trust per cloud: AWS role trust, GCP
workload identity pool provider, Azure federated credential), then IAM bindings and key settings
whose values are unknown at preview.

policy_cases.py gathers them with the other sections for test_policy_rules.py.
"""

from __future__ import annotations

from typing import Any

import policy_fixtures as fx
from policy_mutators import Case, add, doc, edit

GITHUB = "token.actions.githubusercontent.com"


def trust(sub: str | None, aud: str | None = "sts.amazonaws.com") -> str:
    cond: dict[str, Any] = {"StringEquals": {}}
    if sub:
        cond["StringEquals"][f"{GITHUB}:sub"] = sub
    if aud:
        cond["StringEquals"][f"{GITHUB}:aud"] = aud
    return doc(
        {
            "Effect": "Allow",
            "Principal": {"Federated": f"arn:aws:iam::111122223333:oidc-provider/{GITHUB}"},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": cond,
        }
    )


FIC = "azure-native:managedidentity:FederatedIdentityCredential"
WIP = "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider"


CASES: list[Case] = [
    (
        "ci-aws-pinned-ok",
        fx.aws_stack,
        add("aws:iam/role:Role", "ci-deploy", {"assumeRolePolicy": trust("repo:acme/ml:environment:prod")}),
        set(),
    ),
    (
        "ci-aws-wildcard-sub",
        fx.aws_stack,
        add("aws:iam/role:Role", "ci-deploy", {"assumeRolePolicy": trust("repo:acme/*")}),
        {("ci-oidc-subject-pinned", "ci-deploy")},
    ),
    (
        "ci-aws-no-sub",
        fx.aws_stack,
        add("aws:iam/role:Role", "ci-deploy", {"assumeRolePolicy": trust(None)}),
        {("ci-oidc-subject-pinned", "ci-deploy")},
    ),
    (
        "ci-gcp-unscoped-provider",
        fx.gcp_stack,
        add(
            WIP,
            "github",
            {
                "workloadIdentityPoolId": "ci",
                "workloadIdentityPoolProviderId": "github",
                "oidc": {"issuerUri": f"https://{GITHUB}"},
            },
        ),
        {("ci-oidc-subject-pinned", "github")},
    ),
    (
        "ci-gcp-scoped-ok",
        fx.gcp_stack,
        add(
            WIP,
            "github",
            {
                "workloadIdentityPoolId": "ci",
                "workloadIdentityPoolProviderId": "github",
                "oidc": {"issuerUri": f"https://{GITHUB}"},
                "attributeCondition": "assertion.repository == 'acme/ml'",
            },
        ),
        set(),
    ),
    (
        "ci-azure-wildcard-subject",
        fx.azure_stack,
        add(
            FIC,
            "github-deploy",
            {
                "resourceName": "ci",
                "issuer": f"https://{GITHUB}",
                "subject": "repo:acme/ml:*",
                "audiences": ["api://AzureADTokenExchange"],
            },
        ),
        {("ci-oidc-subject-pinned", "github-deploy")},
    ),
    (
        "ci-azure-pinned-ok",
        fx.azure_stack,
        add(
            FIC,
            "github-deploy",
            {
                "resourceName": "ci",
                "issuer": f"https://{GITHUB}",
                "subject": "repo:acme/ml:environment:prod",
                "audiences": ["api://AzureADTokenExchange"],
            },
        ),
        set(),
    ),
]

CASES += [
    (
        "gcp-basic-role-unknown-member",
        fx.gcp_stack,
        add(
            "gcp:projects/iAMMember:IAMMember",
            "owner",
            {"project": "p", "role": "roles/owner", "member": fx.UNKNOWN},
        ),
        {("iam-no-admin", "owner"), ("gcp-no-public-iam-members", "owner?")},
    ),
    (
        "azure-owner-scope-unknown",
        fx.azure_stack,
        add(
            "azure-native:authorization:RoleAssignment",
            "owner-somewhere",
            {
                "principalId": fx.UNKNOWN,
                "roleDefinitionId": "/providers/Microsoft.Authorization/roleDefinitions/8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
                "scope": fx.UNKNOWN,
            },
        ),
        {("iam-no-admin", "owner-somewhere?")},
    ),
    (
        "azure-custom-role-on-a-container-ok",
        fx.azure_stack,
        add(
            "azure-native:authorization:RoleAssignment",
            "writer",
            {
                "principalId": fx.UNKNOWN,
                "roleDefinitionId": fx.UNKNOWN,
                "scope": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/a/blobServices/default/containers/models",
            },
        ),
        set(),
    ),
]

CASES += [
    (
        "aws-key-rotation-unknown",
        fx.aws_stack,
        edit("aws:kms/key:Key", "data-key", lambda i: i.update(enableKeyRotation=fx.UNKNOWN)),
        {("kms-key-rotation", "data-key?")},
    ),
    (
        "aws-key-policy-unknown",
        fx.aws_stack,
        edit("aws:kms/key:Key", "data-key", lambda i: i.update(policy=fx.UNKNOWN)),
        {("kms-key-policy-no-wildcard-principal", "data-key?")},
    ),
    (
        "gcp-key-rotation-unknown",
        fx.gcp_stack,
        edit("gcp:kms/cryptoKey:CryptoKey", "data-key", lambda i: i.update(rotationPeriod=fx.UNKNOWN)),
        {("kms-key-rotation", "data-key?")},
    ),
]
