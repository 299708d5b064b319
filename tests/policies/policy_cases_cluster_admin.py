"""Mutants for k8s-cluster-admin-grants: cluster-admin on the Kubernetes API granted through cloud IAM (EKS access
policies and the creator bootstrap, AKS roles, admin groups and local accounts, GKE roles), and the narrower
grants beside them that must stay quiet.

policy_cases.py gathers them with the other sections for test_policy_rules.py.
"""

from __future__ import annotations

from typing import Any

import policy_fixtures as fx
from policy_mutators import AKS, EKS, Case, _set, add

RULE = "k8s-cluster-admin-grants"
ACCESS_POLICY = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
EKS_POLICY = "arn:aws:eks::aws:cluster-access-policy/"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
ROLES = "/subscriptions/0000/providers/Microsoft.Authorization/roleDefinitions/"
AKS_RBAC_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
AKS_RBAC_READER = "7f6c6a51-bcf8-42ba-9220-52d62157d7db"
CLUSTER_ID = "/subscriptions/0000/resourceGroups/ml/providers/Microsoft.ContainerService/managedClusters/aks"


def _association(policy: str, scope: dict[str, Any]) -> dict[str, Any]:
    return {
        "clusterName": "eu-ml-dev",
        "principalArn": "arn:aws:iam::111122223333:role/ci-deployer",
        "policyArn": policy if policy == fx.UNKNOWN else EKS_POLICY + policy,
        "accessScope": scope,
    }


def _assignment(role: str, scope: str) -> dict[str, Any]:
    return {
        "principalId": "00000000-0000-0000-0000-000000000002",
        "principalType": "ServicePrincipal",
        "roleDefinitionId": role if role == fx.UNKNOWN else ROLES + role,
        "scope": scope,
    }


def _gcp_grant(role: str) -> dict[str, Any]:
    return {"project": "p", "role": role, "member": "serviceAccount:deployer@p.iam.gserviceaccount.com"}


CASES: list[Case] = [
    (
        "eks-cluster-admin-policy-cluster-scope",
        fx.aws_stack,
        add(
            ACCESS_POLICY, "deployer-admin", _association("AmazonEKSClusterAdminPolicy", {"type": "cluster"})
        ),
        {(RULE, "deployer-admin")},
    ),
    (
        "eks-cluster-admin-policy-namespace-scope-ok",
        fx.aws_stack,
        add(
            ACCESS_POLICY,
            "deployer-admin",
            _association("AmazonEKSClusterAdminPolicy", {"type": "namespace", "namespaces": ["serving"]}),
        ),
        set(),
    ),
    (
        "eks-view-policy-cluster-scope-ok",
        fx.aws_stack,
        add(ACCESS_POLICY, "auditor-view", _association("AmazonEKSViewPolicy", {"type": "cluster"})),
        set(),
    ),
    (
        "eks-access-policy-unknown",
        fx.aws_stack,
        add(ACCESS_POLICY, "late", _association(fx.UNKNOWN, {"type": "cluster"})),
        {(RULE, "late?")},
    ),
    (
        "eks-creator-bootstrap-admin",
        fx.aws_stack,
        _set(EKS, "cluster", "accessConfig.bootstrapClusterCreatorAdminPermissions", True),
        {(RULE, "cluster")},
    ),
    # Absent, the provider's default (true) applies.
    (
        "eks-creator-bootstrap-default",
        fx.aws_stack,
        _set(EKS, "cluster", "accessConfig", {}),
        {(RULE, "cluster")},
    ),
    (
        "aks-rbac-cluster-admin-on-cluster",
        fx.azure_stack,
        add(ROLE_ASSIGNMENT, "deployer-cluster-admin", _assignment(AKS_RBAC_CLUSTER_ADMIN, CLUSTER_ID)),
        {(RULE, "deployer-cluster-admin")},
    ),
    (
        "aks-rbac-cluster-admin-scope-unknown",
        fx.azure_stack,
        add(ROLE_ASSIGNMENT, "deployer-cluster-admin", _assignment(AKS_RBAC_CLUSTER_ADMIN, fx.UNKNOWN)),
        {(RULE, "deployer-cluster-admin")},
    ),
    (
        "aks-rbac-reader-on-cluster-ok",
        fx.azure_stack,
        add(ROLE_ASSIGNMENT, "auditor-reader", _assignment(AKS_RBAC_READER, CLUSTER_ID)),
        set(),
    ),
    (
        "aks-cluster-admin-on-a-storage-account-ok",  # no cluster below that scope
        fx.azure_stack,
        add(
            ROLE_ASSIGNMENT,
            "misplaced",
            _assignment(
                AKS_RBAC_CLUSTER_ADMIN,
                "/subscriptions/0000/resourceGroups/ml/providers/Microsoft.Storage/storageAccounts/eumldevdata",
            ),
        ),
        set(),
    ),
    (
        "aks-unknown-role-at-resource-group",  # iam-no-admin cannot exclude Owner there either
        fx.azure_stack,
        add(ROLE_ASSIGNMENT, "late", _assignment(fx.UNKNOWN, "/subscriptions/0000/resourceGroups/ml")),
        {(RULE, "late?"), ("iam-no-admin", "late?")},
    ),
    (
        "aks-admin-group",
        fx.azure_stack,
        _set(AKS, "cluster", "aadProfile.adminGroupObjectIDs", ["00000000-0000-0000-0000-00000000000a"]),
        {(RULE, "cluster")},
    ),
    (
        "aks-local-accounts",
        fx.azure_stack,
        _set(AKS, "cluster", "disableLocalAccounts", False),
        {(RULE, "cluster")},
    ),
    (
        "gke-container-admin",
        fx.gcp_stack,
        add("gcp:projects/iAMMember:IAMMember", "deployer-gke", _gcp_grant("roles/container.admin")),
        {(RULE, "deployer-gke")},
    ),
    (
        "gke-container-developer-ok",
        fx.gcp_stack,
        add("gcp:projects/iAMMember:IAMMember", "deployer-gke", _gcp_grant("roles/container.developer")),
        set(),
    ),
]
