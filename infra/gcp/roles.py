"""GCP role bindings as pure data: which predefined role each identity gets on which bucket or repository.

Bindings are on the resource (bucket, repository), never on the project, so no identity can reach
anything else. Callers never need KMS roles: GCS and Artifact Registry encrypt with the key through their
own service agents, which get `roles/cloudkms.cryptoKeyEncrypterDecrypter` on this one key only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from infra.config import ConfigError, PlatformConfig, limits
from infra.shape import (
    BUCKET_ACCESS,
    BUDGET_IDENTITY,
    IDENTITIES,
    IMAGE_PULL,
    IMAGE_PUSH,
    PREFIX_ACCESS,
    Access,
    ServiceAccountRef,
)

BUCKET_ROLES: Mapping[Access, str] = {
    Access.READ: "roles/storage.objectViewer",
    # Create objects, cannot read, overwrite or delete them.
    Access.WRITE: "roles/storage.objectCreator",
    # Read, list, create, overwrite and delete objects; no bucket or IAM administration.
    Access.READ_WRITE: "roles/storage.objectUser",
}
REPOSITORY_PUSH_ROLE = "roles/artifactregistry.writer"
# Read artifacts and their metadata; nothing written (writer already includes it).
REPOSITORY_PULL_ROLE = "roles/artifactregistry.reader"
KEY_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
WORKLOAD_IDENTITY_ROLE = "roles/iam.workloadIdentityUser"


@dataclass(frozen=True, slots=True)
class Binding:
    identity: str
    target: str  # bucket purpose or image name
    role: str


def bucket_bindings(identity: str) -> list[Binding]:
    return [
        Binding(identity, purpose, BUCKET_ROLES[access])
        for purpose, access in sorted(BUCKET_ACCESS[identity].items())
    ]


@dataclass(frozen=True, slots=True)
class PrefixBinding:
    """A bucket role limited to one object prefix by an IAM Condition (needs uniform bucket-level access)."""

    identity: str
    target: str  # bucket purpose
    prefix: str
    role: str

    def expression(self, bucket_name: str) -> str:
        objects = f'resource.name.startsWith("projects/_/buckets/{bucket_name}/objects/{self.prefix}")'
        if self.role == BUCKET_ROLES[Access.WRITE]:
            return objects
        # Listing is checked on the bucket itself (objects.list has no object name): allowed, so the
        # reader can find its objects; reading stays limited to the prefix.
        return f'resource.name == "projects/_/buckets/{bucket_name}" || {objects}'


def prefix_bindings(identity: str) -> list[PrefixBinding]:
    return [
        PrefixBinding(identity, g.bucket, g.prefix, BUCKET_ROLES[g.access]) for g in PREFIX_ACCESS[identity]
    ]


def repository_bindings(identity: str) -> list[Binding]:
    """Push (shape.IMAGE_PUSH) or read-only (shape.IMAGE_PULL) bindings, one per repository."""
    pushes = [Binding(identity, image, REPOSITORY_PUSH_ROLE) for image in IMAGE_PUSH[identity]]
    pulls = [
        Binding(identity, image, REPOSITORY_PULL_ROLE)
        for image in IMAGE_PULL[identity]
        if image not in IMAGE_PUSH[identity]
    ]
    return pushes + pulls


NODES_IDENTITY = "nodes"
# Every Google service account the stack creates: the workload identities, the budget job's, the nodes'.
ACCOUNTS: tuple[str, ...] = (*IDENTITIES, BUDGET_IDENTITY, NODES_IDENTITY)


def account_id(cfg: PlatformConfig, identity: str) -> str:
    """A service account id, `mlp-<stack>-<identity>`, cut to the 30 characters Google allows: the stacks
    deployed so far got their ids this way, and a changed id would replace the account. check_account_ids
    refuses, before any resource is declared, a stack whose cut ids Google would refuse."""
    return f"{cfg.name}-{identity}"[: limits.GCP_SERVICE_ACCOUNT_ID.maximum]


def refused_account_ids(ids: Mapping[str, str]) -> list[str]:
    """The ids (owner -> id) serviceAccounts.create would refuse, or that two owners share (a 409), described
    for an error message; the platform stack and the bootstrap both cut ids to 30 characters."""
    bound, pattern = limits.GCP_SERVICE_ACCOUNT_ID, limits.GCP_SERVICE_ACCOUNT_ID_PATTERN
    bad = [f"{aid!r}" for aid in ids.values() if not (bound.admits(len(aid)) and re.fullmatch(pattern, aid))]
    owners = {aid: [who for who, a in ids.items() if a == aid] for aid in ids.values()}
    bad += [f"{aid!r} for {' and '.join(who)}" for aid, who in owners.items() if len(who) > 1]
    return sorted(set(bad))


def check_account_ids(cfg: PlatformConfig) -> None:
    """serviceAccounts.create refuses an id that ends in `-` (a cut can), and two identities whose cut ids
    are equal would collide: found here rather than halfway through `pulumi up`."""
    bound, pattern = limits.GCP_SERVICE_ACCOUNT_ID, limits.GCP_SERVICE_ACCOUNT_ID_PATTERN
    bad = refused_account_ids({identity: account_id(cfg, identity) for identity in ACCOUNTS})
    if bad:
        room = (bound.maximum or 0) - len(f"{cfg.name}-{max(ACCOUNTS, key=len)}") + len(cfg.stack)
        raise ConfigError(
            "stack", cfg.stack,
            f"service account ids `mlp-<stack>-<identity>` cut to {bound.maximum} characters that Google refuses: "
            f"{', '.join(bad)}; Google takes {bound.describe()} matching {pattern}, one per account: "
            f"use a stack name of lowercase letters, digits and hyphens, of at most {room} characters (the "
            f"longest id, mlp-<stack>-{max(ACCOUNTS, key=len)}, is then whole)",
        )  # fmt: skip


def service_account_email(account_id: str, project: str) -> str:
    return f"{account_id}@{project}.iam.gserviceaccount.com"


def workload_identity_member(project: str, sa: ServiceAccountRef) -> str:
    """The Kubernetes service account as an IAM principal (GKE Workload Identity)."""
    return f"serviceAccount:{project}.svc.id.goog[{sa.namespace}/{sa.name}]"


def compute_agent(project_number: str) -> str:
    """Compute Engine's service agent (encrypts node boot disks). `generateServiceIdentity` returns no
    email for compute.googleapis.com, so this is the documented address
    (cloud.google.com/compute/docs/disks/customer-managed-encryption)."""
    return f"service-{project_number}@compute-system.iam.gserviceaccount.com"
