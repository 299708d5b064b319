"""The shape every cloud implements: bucket purposes, identities, who may do what, pool labels and taints.

Cloud modules translate these tables into their own policy documents and role bindings; the tables are
the single place where least privilege is decided.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
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
    # The drift job's identity: only prefix grants (below), no whole bucket.
    "monitor": {},
}

# Prefixes of the logs and models buckets that monitoring uses (issue 13). The logs bucket also holds
# access logs and audit trails, so monitoring identities get these prefixes only, never the bucket.
INFERENCE_PREFIX, RAW_SAMPLE_PREFIX, DRIFT_PREFIX = "inference/", "raw-sample/", "drift/"
REFERENCE_PREFIX = "reference/"


@dataclass(frozen=True, slots=True)
class PrefixGrant:
    bucket: str
    prefix: str  # ends with "/"
    access: Access


# Least privilege below bucket level: identity -> object prefixes it may read or write.
PREFIX_ACCESS: Mapping[str, tuple[PrefixGrant, ...]] = {
    # The pipeline's drift-check step reads the reference and its promote step replaces it (the drift job's
    # reference of the promoted model, `reference.jsonl`): replacing an object is a delete on GCS, which
    # `models: WRITE` (create only) lacks, and reading it back is nowhere else in the trainer's models access.
    "trainer": (PrefixGrant("models", REFERENCE_PREFIX, Access.READ_WRITE),),
    # Triton writes sampled inference records and the opt-in raw sample; it cannot read them back.
    "server": (
        PrefixGrant("logs", INFERENCE_PREFIX, Access.WRITE),
        PrefixGrant("logs", RAW_SAMPLE_PREFIX, Access.WRITE),
    ),
    "ci-deployer": (),
    # The drift job reads the records and the training reference, and writes its report (overwriting
    # the previous one: GCS needs delete rights for an overwrite, so read-write on drift/ only).
    "monitor": (
        PrefixGrant("logs", INFERENCE_PREFIX, Access.READ),
        PrefixGrant("models", REFERENCE_PREFIX, Access.READ),
        PrefixGrant("logs", DRIFT_PREFIX, Access.READ_WRITE),
    ),
}
# Identity -> images it may push (everyone may pull through the node identity).
IMAGE_PUSH: Mapping[str, tuple[str, ...]] = {
    "trainer": (),
    "server": (),
    "ci-deployer": IMAGES,
    "monitor": (),
}
# Identity -> images it may read over the registry API as a pod (the kubelet pulls with the node identity;
# an HTTP client in a pod cannot): the retraining pipeline's `images` step runs as the trainer and checks
# the CI-built images by digest (pipeline/registry_auth.py). Read only, never push.
IMAGE_PULL: Mapping[str, tuple[str, ...]] = {
    "trainer": IMAGES,
    "server": (),
    "ci-deployer": (),
    "monitor": (),
}
IDENTITIES: tuple[str, ...] = tuple(BUCKET_ACCESS)


def accesses(identity: str) -> set[Access]:
    """Every kind of object access the identity has (bucket and prefix grants): what its key use needs."""
    return {*BUCKET_ACCESS[identity].values(), *(g.access for g in PREFIX_ACCESS[identity])}


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
    "monitor": ServiceAccountRef("drift", "monitor"),
}

# The budget cost job (`python -m monitoring budget`, issue 13): its own identity and service account,
# apart from IDENTITIES (no bucket, no image). AWS Budgets and Azure Consumption return the forecast; GCP's
# Budgets API returns no spend, so there the job drains the budget's Pub/Sub notifications.
BUDGET_IDENTITY = "budget"
BUDGET_SERVICE_ACCOUNT = ServiceAccountRef("cost", "budget")


def budget_name(resource_prefix: str) -> str:
    """The stack's monthly budget (AWS and Azure: its name; GCP: its display name): `mlp-<stack>-monthly`."""
    return f"{resource_prefix}-monthly"


@dataclass(frozen=True, slots=True)
class BudgetJob:
    """What a cloud hands the budget CronJob: the CLI arguments that locate its budget (`--cloud aws
    --account-id ID`, `--cloud azure --scope RG_ID` or `--cloud gcp --subscription SUB`) and how its
    service account gets the identity."""

    cli_args: tuple[pulumi.Input[str], ...]
    sa_annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)


POOL_LABEL = "platform.eu-ml/pool"
GPU_TAINT_KEY, GPU_TAINT_VALUE, GPU_TAINT_EFFECT = "nvidia.com/gpu", "present", "NoSchedule"
POOLS: tuple[str, ...] = ("system", "serving", "gpu")


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint as Kubernetes writes it (`key=value:Effect`)."""

    key: str
    value: str
    effect: str

    def toleration(self) -> dict[str, str]:
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}

    def to_output(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


GPU_TAINT = Taint(GPU_TAINT_KEY, GPU_TAINT_VALUE, GPU_TAINT_EFFECT)


@dataclass(frozen=True, slots=True)
class PoolSelector:
    """What a pod needs to land on a pool: its node selector and the tolerations of the pool's taints."""

    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, str], ...] = ()

    def to_output(self) -> dict[str, Any]:
        return {"nodeSelector": dict(self.node_selector), "tolerations": [dict(t) for t in self.tolerations]}


GPU_TOLERATION = GPU_TAINT.toleration()
# The taints the program declares on each pool (every cloud); a cloud may add its own (CloudPlatform).
POOL_TAINTS: Mapping[str, tuple[Taint, ...]] = {"system": (), "serving": (), "gpu": (GPU_TAINT,)}
POOL_SELECTORS: Mapping[str, PoolSelector] = {
    pool: PoolSelector({POOL_LABEL: pool}, tuple(t.toleration() for t in POOL_TAINTS[pool])) for pool in POOLS
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


@dataclass(frozen=True, slots=True)
class StorageClassSpec:
    """A StorageClass the shared Kubernetes layer declares as the cluster's default, for clouds that ship none.

    PersistentVolumeClaims that name no class (the Prometheus server chart's, Alertmanager's
    volumeClaimTemplates) get the cluster's default class, so a cluster without one never binds them.
    """

    name: str
    provisioner: str
    # The provisioner's parameters (all strings in Kubernetes): volume type, encryption, key.
    parameters: Mapping[str, pulumi.Input[str]]
    # Volumes are created in the zone of the pod that first uses them (a node pool spans zones).
    volume_binding_mode: str = "WaitForFirstConsumer"
    allow_volume_expansion: bool = True
    reclaim_policy: str = "Delete"


# The annotation that marks a StorageClass as the default (kubernetes.io/docs/concepts/storage/storage-classes/).
DEFAULT_STORAGE_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


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
    # The default StorageClass the shared layer declares (and makes every PVC consumer wait for), or None
    # where the managed cluster ships a default class of its own: every cloud must decide.
    default_storage_class: StorageClassSpec | None
    # Outputs a user needs after `up` (see infra/README.md, "Stack outputs").
    cluster_endpoint: pulumi.Input[str] = ""
    registry: pulumi.Input[str] = ""
    # Key ids: `environment` everywhere (KMS key ARN, Cloud KMS key name, Key Vault key URI).
    key_ids: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # Identity -> its cloud principal (IAM role ARN, Google service account email, managed identity client id).
    identity_principals: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    extra_outputs: Mapping[str, Any] = field(default_factory=dict)
    # Annotations (and pod labels) a service account needs so its pods get the cloud identity.
    sa_annotations: Mapping[str, Mapping[str, pulumi.Input[str]]] = field(default_factory=dict)
    pod_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Cluster add-ons that only some clouds need (autoscaler, spot handling), installed by the shared layer.
    addons: list[HelmChart] = field(default_factory=list)
    # Whether the cloud's GPU nodes lack NVIDIA's device plugin (GKE installs its own).
    needs_device_plugin: bool = True
    # Taints the cloud adds by itself, per pool (AKS taints spot nodes): pods must tolerate them too.
    cloud_taints: Mapping[str, tuple[Taint, ...]] = field(default_factory=dict)
    # How a spot node's pods get SIGTERM before the VM goes (a handler chart, or the cloud's own drain).
    spot_drain: str = ""
    # Egress the server's pods need for their cloud identity (NetworkPolicy peers and ports).
    identity_egress: Sequence[Mapping[str, Any]] = ()
    # The budget cost job's inputs (every cloud); None renders no job.
    budget_job: BudgetJob | None = None
    # Resources the Kubernetes provider must wait for (a node pool, API access for the deployer).
    depends_on: list[pulumi.Resource] = field(default_factory=list)

    def pool_taints(self) -> dict[str, tuple[Taint, ...]]:
        """Every taint a pool's nodes carry: the program's and the cloud's own."""
        return {pool: (*POOL_TAINTS[pool], *self.cloud_taints.get(pool, ())) for pool in POOLS}

    def pool_selectors(self) -> dict[str, PoolSelector]:
        return {
            pool: PoolSelector({POOL_LABEL: pool}, tuple(t.toleration() for t in taints))
            for pool, taints in self.pool_taints().items()
        }


def image_reference(repository: pulumi.Input[str], image: str) -> pulumi.Output[str]:
    """`serving.image` config -> full reference: a tag, a `sha256:` digest, or already a full reference."""
    if "/" in image:
        return pulumi.Output.from_input(image)
    separator = "@" if image.startswith("sha256:") else ":"
    return pulumi.Output.concat(repository, separator, image)
