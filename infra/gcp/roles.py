"""GCP role bindings as pure data: which predefined role each identity gets on which bucket or repository.

Bindings are on the resource (bucket, repository), never on the project, so no identity can reach
anything else. Callers never need KMS roles: GCS and Artifact Registry encrypt with the key through their
own service agents, which get `roles/cloudkms.cryptoKeyEncrypterDecrypter` on this one key only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infra.shape import BUCKET_ACCESS, IMAGE_PULL, IMAGE_PUSH, PREFIX_ACCESS, Access, ServiceAccountRef

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
