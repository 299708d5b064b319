"""Azure role assignments as pure data: built-in role ids, the one custom role, and the scopes.

Assignments are scoped to single blob containers, the registry or the key vault; none is on the
subscription. Azure has no built-in write-only blob role, so `Access.WRITE` uses a custom role that can
create blobs but not read, list or delete them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from infra.shape import BUCKET_ACCESS, IMAGE_PULL, IMAGE_PUSH, PREFIX_ACCESS, Access

# Built-in role definition ids (identical in every tenant).
STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
STORAGE_BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
ACR_PUSH = "8311e382-0749-4cb8-b61a-304f252e45ec"
ACR_PULL = "7f951dda-4ed3-4680-a7ca-43fe172d538d"
KEY_VAULT_CRYPTO_OFFICER = "14b46e9e-c2b7-41b4-b07b-48a6ebf60603"
KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER = "e147488a-f6f5-4113-8e2d-b22465e65bf6"
KEY_VAULT_CRYPTO_USER = "12338af0-0e69-4776-bea7-57ae8d297424"
NETWORK_CONTRIBUTOR = "4d97b98b-1d4f-4787-a291-c67834d212e7"
# "Cost Management Reader": Microsoft.Consumption/*/read and Microsoft.CostManagement/*/read (budgets with
# their forecastSpend), assignable at a resource group: the budget job's only role.
COST_MANAGEMENT_READER = "72fafb9e-0641-4937-9268-a91bfd8191a3"
# "Azure Kubernetes Service RBAC Cluster Admin": every Kubernetes action cluster-wide (Azure RBAC for AKS).
AKS_RBAC_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"

BLOB_WRITE_DATA_ACTIONS = (
    "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write",
    "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/add/action",
)
WRITER_ROLE = "writer"
BUCKET_ROLES: Mapping[Access, str] = {
    Access.READ: STORAGE_BLOB_DATA_READER,
    Access.WRITE: WRITER_ROLE,
    Access.READ_WRITE: STORAGE_BLOB_DATA_CONTRIBUTOR,
}


@dataclass(frozen=True, slots=True)
class Assignment:
    identity: str
    target: str  # container (bucket purpose) or "registry"
    role: str  # built-in role id, or WRITER_ROLE for the custom one


def container_assignments(identity: str) -> list[Assignment]:
    return [Assignment(identity, p, BUCKET_ROLES[a]) for p, a in sorted(BUCKET_ACCESS[identity].items())]


_BLOBS = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"


# Storage Blob Data Contributor's data actions besides read and the writes: READ_WRITE limits them too, or the
# conditional role would delete or rename (move) any blob of the container.
BLOB_DELETE_DATA_ACTIONS = (f"{_BLOBS}/delete", f"{_BLOBS}/move/action")


def prefix_condition(access: Access, prefixes: tuple[str, ...]) -> str:
    """ABAC condition (version 2.0) that limits a container role to blobs under `prefixes`: reading and
    listing for readers, writing for writers, all of them and deleting for read-writers
    (learn.microsoft.com/azure/storage/blobs/storage-auth-abac-examples, "Read or list blobs in named folders",
    "Read, write, or delete blobs in named containers"). Each data action the role has is limited: an action
    the condition leaves out is allowed on every blob of the container."""

    def under(attribute: str) -> str:
        return " OR ".join(f"{attribute} StringStartsWith '{p}'" for p in prefixes)

    path = under(f"@Resource[{_BLOBS}:path]")
    read = f"ActionMatches{{'{_BLOBS}/read'}}"
    listing = (
        f"((!({read} AND SubOperationMatches{{'Blob.List'}})) OR ({under(f'@Request[{_BLOBS}:prefix]')}))"
    )
    writes = " AND ".join(f"!(ActionMatches{{'{a}'}})" for a in BLOB_WRITE_DATA_ACTIONS)
    if access is Access.READ:
        return f"((!({read} AND NOT SubOperationMatches{{'Blob.List'}})) OR ({path})) AND {listing}"
    if access is Access.WRITE:
        return f"(({writes}) OR ({path}))"
    deletes = " AND ".join(f"!(ActionMatches{{'{a}'}})" for a in BLOB_DELETE_DATA_ACTIONS)
    return f"((!({read} AND NOT SubOperationMatches{{'Blob.List'}}) AND {writes} AND {deletes}) OR ({path})) AND {listing}"


@dataclass(frozen=True, slots=True)
class PrefixAssignment:
    identity: str
    target: str  # container (bucket purpose)
    prefixes: tuple[str, ...]
    role: str
    condition: str


def prefix_assignments(identity: str) -> list[PrefixAssignment]:
    """One conditional assignment per container and access (Azure refuses a second assignment of the
    same role to the same principal on the same scope, conditions or not)."""
    grouped: dict[tuple[str, Access], list[str]] = {}
    for g in PREFIX_ACCESS[identity]:
        grouped.setdefault((g.bucket, g.access), []).append(g.prefix)
    return [
        PrefixAssignment(identity, bucket, tuple(p), BUCKET_ROLES[access], prefix_condition(access, tuple(p)))
        for (bucket, access), p in sorted(grouped.items(), key=lambda kv: (kv[0][0], kv[0][1].value))
    ]


def registry_assignments(identity: str) -> list[Assignment]:
    """AcrPush for an identity that pushes (shape.IMAGE_PUSH; it includes pull), else AcrPull for one that
    reads (shape.IMAGE_PULL). On the registry: the platform's registry holds only the two image repositories
    (repository-scoped roles need an ABAC-enabled registry)."""
    if IMAGE_PUSH[identity]:
        return [Assignment(identity, "registry", ACR_PUSH)]
    return [Assignment(identity, "registry", ACR_PULL)] if IMAGE_PULL[identity] else []


def role_definition_id(subscription: str, role: str) -> str:
    return f"/subscriptions/{subscription}/providers/Microsoft.Authorization/roleDefinitions/{role}"


def resource_group_id(subscription: str, resource_group: str) -> str:
    return f"/subscriptions/{subscription}/resourceGroups/{resource_group}"


def storage_account_id(subscription: str, resource_group: str, account: str) -> str:
    return f"{resource_group_id(subscription, resource_group)}/providers/Microsoft.Storage/storageAccounts/{account}"


def user_assigned_identity_id(subscription: str, resource_group: str, name: str) -> str:
    return (
        f"{resource_group_id(subscription, resource_group)}"
        f"/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{name}"
    )


def container_scope(subscription: str, resource_group: str, account: str, container: str) -> str:
    return f"{storage_account_id(subscription, resource_group, account)}/blobServices/default/containers/{container}"


def writer_role_guid(stack: str) -> str:
    """Stable id for the custom role, so re-running a stack updates instead of duplicating it."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"eu-ml-platform/{stack}/blob-writer"))


def federated_subject(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"
