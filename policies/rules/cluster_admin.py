"""Cluster-admin on the Kubernetes API granted through the cloud's own IAM, not through RBAC objects.

EKS access policies, EKS's cluster-creator bootstrap, AKS's Azure RBAC roles, admin groups and local admin account,
and GKE's roles/container.admin each make a principal cluster-admin without any ClusterRoleBinding for
iam-no-admin to see. CIS Kubernetes 5.1.1 (EKS/AKS 4.1.1) asks that cluster-admin be used only where required: the
identity that runs `pulumi up` (Helm charts with CRDs, ClusterRoles and webhooks) and a break-glass role for people
may need it. So this rule is advisory: it names each grant, its principal and scope, for a reviewer to accept (a
waiver with their name) or narrow, and it never blocks a deployment.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .core import Context, Resource, Rule, as_list, get, is_unknown, types, undetermined
from .public_access import gcp_iam_type, gcp_members

WHY = "cluster-admin (every verb on every Kubernetes resource: CRDs, ClusterRoles, webhooks, all namespaces' Secrets)"
ACCESS_POLICY = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
AKS_CLUSTER = "azure-native:containerservice:ManagedCluster"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
# The EKS access policy that is Kubernetes' cluster-admin (AmazonEKSAdminPolicy is the namespace `admin` role).
EKS_CLUSTER_ADMIN = re.compile(r"^arn:aws[-a-z]*:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy$")
# Built-in Azure role "Azure Kubernetes Service RBAC Cluster Admin" (the same id in every tenant): every
# Microsoft.ContainerService/managedClusters/* data action, i.e. cluster-admin under Azure RBAC for Kubernetes.
AKS_RBAC_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
# An assignment reaches a cluster when its scope is the cluster (or below it) or one of its ancestors.
_AZURE_SCOPE_REACHES_CLUSTER = re.compile(
    r"^/?$|^/subscriptions/[^/]+/?$|^/subscriptions/[^/]+/resourceGroups/[^/]+/?$"
    r"|^/providers/Microsoft\.Management/managementGroups/|/providers/Microsoft\.ContainerService/managedClusters/",
    re.I,
)
# "Kubernetes Engine Admin": full access to clusters and their Kubernetes API objects.
GKE_CLUSTER_ADMIN_ROLES = frozenset({"roles/container.admin"})
ACCEPT = "accept it with a waiver (finding: violation) naming why it is required, or narrow it"


def _shown(value: object, what: str) -> str:
    return f"{what} unknown at preview" if value is None or is_unknown(value) else str(value)


def check_cluster_admin(r: Resource, ctx: Context) -> Iterator[str]:
    if r.type == ACCESS_POLICY:
        yield from _eks_access_policy(r)
    elif r.type == EKS_CLUSTER:
        yield from _eks_bootstrap(r)
    elif r.type == ROLE_ASSIGNMENT:
        yield from _aks_role_assignment(r)
    elif r.type == AKS_CLUSTER:
        yield from _aks_cluster(r)
    elif gcp_iam_type(r.type):
        yield from _gke_role(r)


def _eks_access_policy(r: Resource) -> Iterator[str]:
    arn = get(r.inputs, "policyArn")
    scope = get(r.inputs, "accessScope.type")
    if is_unknown(arn) or (isinstance(arn, str) and EKS_CLUSTER_ADMIN.match(arn) and is_unknown(scope)):
        yield undetermined(
            "policyArn or accessScope.type is unknown at preview: a cluster-admin grant cannot be excluded"
        )
        return
    if not (isinstance(arn, str) and EKS_CLUSTER_ADMIN.match(arn)) or str(scope).lower() != "cluster":
        return  # another access policy, or cluster-admin limited to listed namespaces
    principal = _shown(get(r.inputs, "principalArn"), "principal")
    cluster = _shown(get(r.inputs, "clusterName"), "cluster")
    yield (
        f"AmazonEKSClusterAdminPolicy at cluster scope for {principal} on EKS cluster {cluster}: {WHY}. "
        f"If this principal needs it (it deploys cluster-scoped charts, or is the break-glass role), {ACCEPT} "
        "(accessScope type namespace, or AmazonEKSEditPolicy/AmazonEKSViewPolicy)."
    )


def _eks_bootstrap(r: Resource) -> Iterator[str]:
    bootstrap = get(r.inputs, "accessConfig.bootstrapClusterCreatorAdminPermissions")
    if is_unknown(bootstrap):
        yield undetermined("accessConfig.bootstrapClusterCreatorAdminPermissions is unknown at preview")
    elif bootstrap is None or bootstrap is True or str(bootstrap).lower() == "true":
        # The provider's default is true: an absent setting grants it too.
        yield (
            "accessConfig.bootstrapClusterCreatorAdminPermissions is not false: the IAM identity that creates the "
            f"cluster (whoever runs `pulumi up`) gets {WHY}, with no access entry to show for it. Set it to false "
            "and grant access through access entries the pack can see."
        )


def _aks_role_assignment(r: Resource) -> Iterator[str]:
    raw_role = get(r.inputs, "roleDefinitionId")
    scope = get(r.inputs, "scope")
    reaches = is_unknown(scope) or (
        isinstance(scope, str) and bool(_AZURE_SCOPE_REACHES_CLUSTER.search(scope))
    )
    if not reaches:
        return  # a storage account, a registry, a key vault: no cluster below it
    if is_unknown(raw_role):
        yield undetermined(
            "roleDefinitionId is unknown at preview and the scope may hold a cluster: a cluster-admin role cannot be excluded"
        )
        return
    if str(raw_role or "").rsplit("/", 1)[-1].lower() != AKS_RBAC_CLUSTER_ADMIN:
        return
    principal = _shown(get(r.inputs, "principalId"), "principal")
    kind = get(r.inputs, "principalType")
    who = f"{principal} ({kind})" if isinstance(kind, str) and not is_unknown(kind) else principal
    where = (
        "a scope unknown at preview (an id assigned when its resource is created: on a cluster, that cluster; on a "
        "resource group or subscription, every cluster in it)"
        if is_unknown(scope)
        else f"scope {scope}"
    )
    yield (
        f"Azure Kubernetes Service RBAC Cluster Admin for {who} at {where}: {WHY}. "
        f"If this principal needs it (it deploys cluster-scoped charts), {ACCEPT} (Azure Kubernetes Service RBAC "
        "Writer/Reader, or a namespace scope `<cluster id>/namespaces/<ns>`)."
    )


def _aks_cluster(r: Resource) -> Iterator[str]:
    groups = get(r.inputs, "aadProfile.adminGroupObjectIDs")
    if is_unknown(groups):
        yield undetermined("aadProfile.adminGroupObjectIDs is unknown at preview")
    for group in as_list(groups):
        yield (
            f"aadProfile.adminGroupObjectIDs makes Entra ID group {_shown(group, 'group')} {WHY}. "
            f"If it is the break-glass group of the people who run the platform, {ACCEPT}."
        )
    local = get(r.inputs, "disableLocalAccounts")
    if is_unknown(local):
        yield undetermined("disableLocalAccounts is unknown at preview")
    elif local is not True:
        yield (
            "disableLocalAccounts is not true: the cluster keeps a local clusterAdmin credential, and anyone allowed "
            "listClusterAdminCredential at a scope above the cluster (Owner, Contributor, Azure Kubernetes Service "
            f"Cluster Admin Role) gets {WHY}, outside Entra ID and its audit. Set disableLocalAccounts: true."
        )


def _gke_role(r: Resource) -> Iterator[str]:
    role = get(r.inputs, "role")
    members = gcp_members(r)
    if isinstance(role, str) and role in GKE_CLUSTER_ADMIN_ROLES and not members:
        yield f"{role} granted to a member unknown at preview: {WHY} on every GKE cluster below it. If required, {ACCEPT}."
    for role, member in members:
        if role in GKE_CLUSTER_ADMIN_ROLES:
            yield (
                f"{role} granted to {member}: {WHY} on every GKE cluster below it. If this principal needs "
                f"it, {ACCEPT} (roles/container.developer, or Kubernetes RBAC in the namespaces it deploys to)."
            )


APPLIES = types(ACCESS_POLICY, EKS_CLUSTER, ROLE_ASSIGNMENT, AKS_CLUSTER)

RULES = (
    Rule(
        name="k8s-cluster-admin-grants",
        description="Cluster-admin on the Kubernetes API granted through cloud IAM (EKS access policies, AKS roles and admin groups, GKE roles) is shown for review.",
        kind="resource",
        severity="high",
        enforcement="advisory",
        remediation="Keep cluster-admin to the deployer and a break-glass role: accept each such grant with a waiver "
        "(finding: violation) signed by the person accountable, and scope every other grant to namespaces "
        "(EKS namespace access scope, AKS RBAC Writer/Reader at a namespace, GKE container.developer).",
        url="https://docs.aws.amazon.com/eks/latest/userguide/access-policy-permissions.html",
        validate=check_cluster_admin,
        applies_to=lambda t: APPLIES(t) or gcp_iam_type(t),
    ),
)
