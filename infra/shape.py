"""The shape every cloud implements: bucket purposes, identities, who may do what, pool labels and taints.

Cloud modules translate these tables into their own policy documents and role bindings; the tables are
the single place where least privilege is decided.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

# Buckets (S3/GCS) or blob containers (Azure): the data lifecycle, one store per stage.
BUCKETS: tuple[str, ...] = ("raw", "splits", "checkpoints", "models", "logs")
DATA_BUCKETS: tuple[str, ...] = tuple(b for b in BUCKETS if b != "logs")
# The two container images the platform runs.
IMAGES: tuple[str, ...] = ("training", "serving")


class Access(enum.Enum):
    READ = "read"
    WRITE = "write"
    READ_WRITE = "read-write"


# Least privilege, cloud-neutral: identity -> bucket -> access. Anything absent is denied.
BUCKET_ACCESS: Mapping[str, Mapping[str, Access]] = {
    "trainer": {
        "raw": Access.READ,
        "splits": Access.READ,
        "checkpoints": Access.READ_WRITE,
        "models": Access.WRITE,
    },
    "server": {"models": Access.READ},
    "ci-deployer": {},
}
# Identity -> images it may push (everyone may pull through the node identity).
IMAGE_PUSH: Mapping[str, tuple[str, ...]] = {"trainer": (), "server": (), "ci-deployer": IMAGES}
IDENTITIES: tuple[str, ...] = tuple(BUCKET_ACCESS)


@dataclass(frozen=True, slots=True)
class ServiceAccountRef:
    namespace: str
    name: str


# Each cloud identity is bound to exactly one Kubernetes service account (IRSA/Pod Identity, GKE Workload
# Identity, Azure workload identity federation).
SERVICE_ACCOUNTS: Mapping[str, ServiceAccountRef] = {
    "trainer": ServiceAccountRef("training", "trainer"),
    "server": ServiceAccountRef("serving", "triton"),
    "ci-deployer": ServiceAccountRef("ci", "ci-deployer"),
}

POOL_LABEL = "platform.eu-ml/pool"
GPU_TAINT_KEY, GPU_TAINT_VALUE, GPU_TAINT_EFFECT = "nvidia.com/gpu", "present", "NoSchedule"
POOLS: tuple[str, ...] = ("system", "serving", "gpu")


@dataclass(frozen=True, slots=True)
class PoolSelector:
    """What a pod needs to land on a pool: its node selector and the tolerations of the pool's taints."""

    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, str], ...] = ()

    def to_output(self) -> dict[str, Any]:
        return {"nodeSelector": dict(self.node_selector), "tolerations": [dict(t) for t in self.tolerations]}


GPU_TOLERATION = {
    "key": GPU_TAINT_KEY,
    "operator": "Equal",
    "value": GPU_TAINT_VALUE,
    "effect": GPU_TAINT_EFFECT,
}
POOL_SELECTORS: Mapping[str, PoolSelector] = {
    "system": PoolSelector({POOL_LABEL: "system"}),
    "serving": PoolSelector({POOL_LABEL: "serving"}),
    "gpu": PoolSelector({POOL_LABEL: "gpu"}, (GPU_TOLERATION,)),
}


@dataclass(frozen=True, slots=True)
class HelmChart:
    """A cluster add-on from a public Helm repository, pinned to a chart version."""

    name: str
    chart: str
    repo: str
    version: str
    namespace: str
    values: Mapping[str, Any]


@dataclass
class CloudPlatform:
    """What a cloud's stack hands the shared Kubernetes layer and the stack outputs."""

    cloud: str
    cluster_name: pulumi.Input[str]
    kubeconfig: pulumi.Output[str]
    # Every bucket as a URI (`s3://`, `gs://`, `https://<account>.blob.core.windows.net/<container>`).
    bucket_uris: Mapping[str, pulumi.Input[str]]
    # Image repositories (no tag): `<registry>/<path>/training`.
    image_repositories: Mapping[str, pulumi.Input[str]]
    # Annotations (and pod labels) a service account needs so its pods get the cloud identity.
    sa_annotations: Mapping[str, Mapping[str, pulumi.Input[str]]] = field(default_factory=dict)
    pod_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Cluster add-ons that only some clouds need (autoscaler, spot handling), installed by the shared layer.
    addons: list[HelmChart] = field(default_factory=list)
    # Whether the cloud's GPU nodes lack NVIDIA's device plugin (GKE installs its own).
    needs_device_plugin: bool = True
    # Taints the cloud adds by itself (AKS taints spot nodes), per pool: pods must tolerate them too.
    extra_tolerations: Mapping[str, list[Mapping[str, str]]] = field(default_factory=dict)

    def pool_selectors(self) -> dict[str, PoolSelector]:
        return {
            pool: PoolSelector(sel.node_selector, (*sel.tolerations, *self.extra_tolerations.get(pool, ())))
            for pool, sel in POOL_SELECTORS.items()
        }

    depends_on: list[pulumi.Resource] = field(default_factory=list)


def image_reference(repository: pulumi.Input[str], image: str) -> pulumi.Output[str]:
    """`serving.image` config -> full reference: a tag, a `sha256:` digest, or already a full reference."""
    if "/" in image:
        return pulumi.Output.from_input(image)
    separator = "@" if image.startswith("sha256:") else ":"
    return pulumi.Output.concat(repository, separator, image)
