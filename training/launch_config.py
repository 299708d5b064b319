"""The launch's typed, validated settings (`LaunchConfig`) and their defaults, apart from the renderers in
training/launch.py (which re-exports these names)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training import environment as envvars
from training import launch_uris
from training.errors import ConfigError
from training.launch_uris import DEFAULT_CHECKPOINT_URI

# Equal to infra/shape.py (SERVICE_ACCOUNTS["trainer"], POOL_SELECTORS["gpu"]): the infra is the source of
# truth; they are copied, not imported, because the training image does not ship the Pulumi SDKs.
DEFAULT_NAMESPACE = "training"
DEFAULT_SERVICE_ACCOUNT = "trainer"
DEFAULT_NODE_SELECTOR = {"platform.eu-ml/pool": "gpu"}
DEFAULT_TOLERATIONS = (
    {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
)
# What each cloud adds on top (infra: CloudPlatform.cloud_taints and pod_labels, exported per stack as the
# outputs gpu_pool.taints and trainer_pod_labels; a test renders every stack's plan and checks the Job against
# it): AKS taints its spot nodes by itself, and Azure workload identity injects the token only into pods
# labelled azure.workload.identity/use=true. EKS Pod Identity and GKE Workload Identity need no pod label.
CLOUD_TOLERATIONS: dict[str, tuple[dict[str, str], ...]] = {
    "aws": (),
    "gcp": (),
    "azure": (
        {
            "key": "kubernetes.azure.com/scalesetpriority",
            "operator": "Equal",
            "value": "spot",
            "effect": "NoSchedule",
        },
    ),
}
CLOUD_POD_LABELS: dict[str, dict[str, str]] = {
    "aws": {},
    "gcp": {},
    "azure": {"azure.workload.identity/use": "true"},
}
DEFAULT_IMAGE = "eu-ml-platform/training:latest"
# infra/k8s/monitoring.py PUSHGATEWAY_URL (the same Service in every stack; a test ties the two): the trainer
# pushes its progress stamp there (monitoring/progress.py) for the TrainingNoProgress alert.
DEFAULT_PUSHGATEWAY = "http://prometheus-prometheus-pushgateway.monitoring.svc:9091"
# The optional Secret, in the trainer's namespace, that points the platform at a team's own MLflow server: its keys
# are MLflow's own environment variables (MLFLOW_TRACKING_URI, MLFLOW_TRACKING_TOKEN...), passed whole with envFrom
# into the training Job, the tuning workers and the retraining pipeline's MLflow steps (pipeline/argo.py). Infra
# deploys no MLflow server. Without the Secret the pods start as before and MLflow writes files inside the pod,
# which are lost with it (training/README.md).
MLFLOW_SECRET = "mlflow"
# `python -m containers.build` records the images it built (and pushed) here.
BUILD_RECORD = Path("reports/images/build-record.json")
CONTAINER = "trainer"
RDZV_PORT = 29400
# Kubernetes object names: DNS-1123 labels (the pod hostname `<name>-<index>` must stay one too).
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Secret names: DNS-1123 subdomains (the API server refuses a pod whose envFrom names anything else).
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def mlflow_env_from(secret: str = MLFLOW_SECRET) -> list[dict[str, Any]]:
    """A container's envFrom for the MLflow Secret: every key becomes a variable; optional, so a cluster without
    the Secret starts the pod as before (a required one would leave it in CreateContainerConfigError)."""
    return [{"secretRef": {"name": secret, "optional": True}}]


@dataclass(kw_only=True, frozen=True, slots=True)
class LaunchConfig:
    name: str = "sentiment-train"
    """Job name (also the headless Service and rendezvous id); a DNS label of at most 50 characters."""
    namespace: str = DEFAULT_NAMESPACE
    """Namespace of the trainer service account."""
    image: str = DEFAULT_IMAGE
    """Training image reference (`python -m containers.build` prints it)."""
    nodes: int = 1
    """Pods (one per node): completions = parallelism = nodes."""
    gpus_per_node: int = 1
    """GPUs per pod = torchrun --nproc_per_node; 0 runs CPU workers (one process) without a GPU limit."""
    preset: str = "gpu"
    """Training preset passed to `train --preset`."""
    overrides: tuple[str, ...] = ()
    """key=value overrides passed to `train` after the preset."""
    checkpoint_uri: str = DEFAULT_CHECKPOINT_URI
    """Bucket prefix for checkpoints (the stack output checkpoint_bucket_uri plus a prefix): a spot pod's disk
    dies with its node, so never a local path, and a bucket of `cloud` (training/launch_uris.py). The default is
    the aws dev stack's: on gcp and azure it is refused, naming the flag. An Azure stack's https:// blob URL is
    rewritten to adlfs's az://<container>@<account>.blob.core.windows.net/..."""
    data_uri: str | None = None
    """Dataset URI (TRAINING_DATA_URI); None: the image's bundled corpus. A bucket must be `cloud`'s."""
    output_dir: str = "/workspace/output"
    """Output folder inside the pod (metrics, export bundle; MLflow gets the artifacts)."""
    cloud: str | None = "aws"
    """aws, gcp or azure: which interruption notice the trainer polls and which prices its cost record
    uses; None leaves both to the image's environment."""
    service_account: str = DEFAULT_SERVICE_ACCOUNT
    """Kubernetes service account bound to the trainer's cloud identity."""
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_NODE_SELECTOR))
    """Node labels of the GPU pool."""
    tolerations: tuple[Mapping[str, str], ...] = DEFAULT_TOLERATIONS
    """Tolerations of the GPU pool's taints."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment (names must be declared in training/environment.py)."""
    backoff_limit: int = 3
    """Real failures tolerated before the Job fails (preemptions do not count)."""
    shutdown_timeout_s: int = 25
    """Seconds torchrun gives workers to checkpoint after SIGTERM (GCP/Azure give 30 s in all)."""
    termination_grace_s: int = 30
    """Pod terminationGracePeriodSeconds: kubelet's SIGTERM-to-SIGKILL window; > shutdown_timeout_s."""
    cpu: str = "3"
    """CPU request per pod (tokenization, data loading)."""
    memory: str = "12Gi"
    """Memory request and limit per pod."""
    shm_size: str = "2Gi"
    """Size of the in-memory /dev/shm (NCCL and data loader workers use shared memory)."""
    rdzv_join_timeout_s: int = 1800
    """How long pods wait for each other at the rendezvous: the GPU pool scales from zero, and a new spot node
    (provisioning, driver, image pull) can take well over torchrun's default 10 minutes."""
    cluster_domain: str = "cluster.local"
    """Cluster DNS domain: the rendezvous endpoint is pod 0's fully qualified name, so that torchrun on pod 0
    recognises itself as the host of the rendezvous store."""
    ttl_after_finished_s: int | None = 7 * 24 * 3600
    """Delete the finished Job (and its pods) after this long; None keeps it."""
    active_deadline_s: int | None = 2 * 24 * 3600
    """Hard wall-clock limit of the whole Job (preemptions included): a spot pool that keeps reclaiming the
    nodes cannot loop forever. None: no limit."""
    max_preemptions: int = 30
    """Exits 75 recorded in the checkpoint after which the trainer refuses with exit 3 (fails the Job)."""
    pushgateway_url: str | None = DEFAULT_PUSHGATEWAY
    """Pushgateway for the progress stamp (labelled with the Job name); None: no push."""
    mlflow_secret: str | None = MLFLOW_SECRET
    """Optional Secret whose keys (MLflow's own variables) the trainer gets through envFrom; None: none."""

    def __post_init__(self) -> None:
        if not _DNS_LABEL.match(self.name) or len(self.name) > 50:
            raise ConfigError(
                "name", f"{self.name!r} must be a DNS label (a-z, 0-9, '-') of at most 50 characters"
            )
        if not _DNS_LABEL.match(self.namespace):
            raise ConfigError("namespace", f"{self.namespace!r} is not a valid namespace name")
        if self.nodes < 1:
            raise ConfigError("nodes", f"must be >= 1, got {self.nodes}")
        if self.gpus_per_node < 0:
            raise ConfigError("gpus_per_node", f"must be >= 0, got {self.gpus_per_node}")
        if not self.image:
            raise ConfigError("image", "is empty: pass the training image reference")
        if self.cloud not in (None, "aws", "gcp", "azure"):
            raise ConfigError("cloud", f"{self.cloud!r} is not one of aws, gcp, azure")
        # Normalised here (the Azure stack output's https:// form), so the Job and `launch --tune` get one URI.
        cloud, name, env = self.cloud, self.name, self.env
        checkpoint_uri = launch_uris.checkpoint_uri(self.checkpoint_uri, cloud=cloud, name=name, env=env)
        object.__setattr__(self, "checkpoint_uri", checkpoint_uri)
        object.__setattr__(
            self, "data_uri", launch_uris.data_uri(self.data_uri, cloud=cloud, name=name, env=env)
        )
        for item in self.overrides:
            if "=" not in item:
                raise ConfigError("overrides", f"{item!r} is not key=value")
        # The pod runs `train --preset P OVERRIDES`: a mistyped preset or key used to render and submit, and
        # was refused only in the pod (exit 2, the Job failed) after a GPU node scaled up and pulled the image.
        from training import presets
        from training.config import apply_overrides

        apply_overrides(presets.get(self.preset), list(self.overrides))
        # The same storage given as an override is judged like --checkpoint-uri / --data: it reaches the pod too.
        for item in self.overrides:
            key, _, value = item.partition("=")
            if key.strip() == "checkpoint.uri":
                launch_uris.checkpoint_uri(value.strip(), cloud=cloud, name=name, env=env)
            elif key.strip() == "data.source":
                launch_uris.data_uri(value.strip(), cloud=cloud, name=name, env=env)
        for tol in self.tolerations:
            if tol.get("effect") not in _TAINT_EFFECTS or not tol.get("key"):
                raise ConfigError("tolerations", f"{dict(tol)} needs a key and an effect in {_TAINT_EFFECTS}")
        declared = {v.name for v in envvars.ENVIRONMENT_VARIABLES}
        unknown = sorted(set(self.env) - declared)
        if unknown:
            raise ConfigError(
                "env", f"{unknown} are not declared in training/environment.py: declare them there first"
            )
        if self.mlflow_secret is not None and (
            not _DNS_SUBDOMAIN.match(self.mlflow_secret) or len(self.mlflow_secret) > 253
        ):
            raise ConfigError(
                "mlflow_secret",
                f"{self.mlflow_secret!r} is not a Secret name (lowercase a-z, 0-9, '-', '.'; at most 253)",
            )
        if self.rdzv_join_timeout_s <= 0:
            raise ConfigError("rdzv_join_timeout_s", f"must be > 0, got {self.rdzv_join_timeout_s}")
        if self.max_preemptions < 0:
            raise ConfigError(
                "max_preemptions", f"must be >= 0 (0 disables the cap), got {self.max_preemptions}"
            )
        if self.active_deadline_s is not None and self.active_deadline_s <= 0:
            raise ConfigError("active_deadline_s", f"must be > 0 or None, got {self.active_deadline_s}")
        if self.backoff_limit < 0:
            raise ConfigError("backoff_limit", f"must be >= 0, got {self.backoff_limit}")
        if not 0 < self.shutdown_timeout_s < self.termination_grace_s:
            raise ConfigError(
                "shutdown_timeout_s",
                f"{self.shutdown_timeout_s} must be > 0 and below termination_grace_s={self.termination_grace_s}, "
                "or the kubelet kills the workers mid-save",
            )

    @property
    def rdzv_endpoint(self) -> str:
        return f"{self.name}-0.{self.name}.{self.namespace}.svc.{self.cluster_domain}:{RDZV_PORT}"
