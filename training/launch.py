"""Render (and with --apply, submit) the Kubernetes Job that trains on the spot GPU pool.

    python -m training launch --nodes 2 --gpus-per-node 1 --image REGISTRY/training:0.1.0-abc1234 \\
        --checkpoint-uri s3://acme-mlp-dev-checkpoints/sentiment > job.yaml
    python -m training launch --nodes 2 --apply --kubeconfig ~/.kube/config     # needs a cluster

What it renders (two documents):
- a headless Service named like the Job: it gives pod `<job>-<index>` the DNS name
  `<job>-<index>.<job>.<namespace>.svc.<cluster-domain>`, and pod 0 hosts torchrun's c10d rendezvous;
- an Indexed Job (completions = parallelism = nodes) whose pods run torchrun through training.elastic
  (torchrun that passes exit code 75 through) with `--nnodes=N --nproc_per_node=M --rdzv_backend=c10d`,
  on the GPU pool (node selector + toleration of its taint), with the trainer's service account (its cloud
  identity may write the checkpoint bucket) and the checkpoint URI in TRAINING_CHECKPOINT_URI.

Spot interruptions: `restartPolicy: Never` plus a podFailurePolicy. A pod that fails because its node was
reclaimed (condition DisruptionTarget) or that exits 75 (checkpoint saved, resume me) is replaced without
counting against backoffLimit; the replacement resumes from the latest complete checkpoint. Any other
non-zero exit of the trainer container (bad config 2, a crash, an OOM kill, 3 = too many preemptions) fails
the whole Job at once; 69 (object storage down after retries) counts against backoffLimit. When one node is
lost the surviving workers' collectives fail (gloo: reset connection; NCCL with
TORCH_NCCL_ASYNC_ERROR_HANDLING=2: aborted communicator, raised in Python) or time out
(TRAINING_PG_TIMEOUT_S), and the agents' rendezvous errors are mapped too: every surviving pod exits 75, so
the whole group restarts and meets again at the rendezvous. Preemption loops are capped twice:
activeDeadlineSeconds (default 2 days) and TRAINING_MAX_PREEMPTIONS exits 75 recorded in the checkpoint.

Defaults equal the infra outputs (infra/shape.py: namespace and service account of the trainer identity,
pool label and GPU taint; a test checks they stay equal).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitoring import environment as monitoring_env
from training import environment as envvars
from training.errors import EXIT_PREEMPTED, EXIT_STORAGE, ConfigError

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
# `python -m containers.build` records the images it built (and pushed) here.
BUILD_RECORD = Path("reports/images/build-record.json")
CONTAINER = "trainer"
RDZV_PORT = 29400
# Kubernetes object names: DNS-1123 labels (the pod hostname `<name>-<index>` must stay one too).
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


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
    checkpoint_uri: str = "s3://acme-mlp-dev-checkpoints/sentiment-train"
    """Bucket prefix for checkpoints: a spot pod's disk dies with its node, so never a local path."""
    data_uri: str | None = None
    """Dataset URI (TRAINING_DATA_URI); None: the image's bundled corpus."""
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
        if "://" not in self.checkpoint_uri:
            raise ConfigError(
                "checkpoint_uri",
                f"{self.checkpoint_uri!r} is local: a spot node's disk is lost with the node; "
                "use the checkpoints bucket (s3://, gs:// or az://)",
            )
        for item in self.overrides:
            if "=" not in item:
                raise ConfigError("overrides", f"{item!r} is not key=value")
        for tol in self.tolerations:
            if tol.get("effect") not in _TAINT_EFFECTS or not tol.get("key"):
                raise ConfigError("tolerations", f"{dict(tol)} needs a key and an effect in {_TAINT_EFFECTS}")
        declared = {v.name for v in envvars.ENVIRONMENT_VARIABLES}
        unknown = sorted(set(self.env) - declared)
        if unknown:
            raise ConfigError(
                "env", f"{unknown} are not declared in training/environment.py: declare them there first"
            )
        if self.cloud not in (None, "aws", "gcp", "azure"):
            raise ConfigError("cloud", f"{self.cloud!r} is not one of aws, gcp, azure")
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


# --------------------------------------------------------------------------- pure renderers


def trainer_command(cfg: LaunchConfig) -> list[str]:
    """The container command: torchrun's arguments through training.elastic, then `training train`."""
    nproc = max(cfg.gpus_per_node, 1)
    return [
        "python",
        "-m",
        "training.elastic",
        f"--nnodes={cfg.nodes}",
        f"--nproc_per_node={nproc}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint={cfg.rdzv_endpoint}",
        f"--rdzv_id={cfg.name}",
        # read_timeout: a store that stops answering for 60 s fails the agent's rendezvous (RendezvousError),
        # which training.elastic maps to 75 like a lost peer.
        f"--rdzv_conf=join_timeout={cfg.rdzv_join_timeout_s},read_timeout=60",
        # Restarts are the Job's business (a new pod resumes from the checkpoint), not the agent's: with
        # restarts the agent would wait for a replacement node inside a pod the Job already counts as running.
        "--max_restarts=0",
        f"--shutdown_timeout={cfg.shutdown_timeout_s}",
        "-m",
        "training",
        "train",
        "--preset",
        cfg.preset,
        "--output",
        cfg.output_dir,
        "--checkpoint-uri",
        cfg.checkpoint_uri,
        *(["--data", cfg.data_uri] if cfg.data_uri else []),
        *cfg.overrides,
    ]


def _labels(cfg: LaunchConfig) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "training",
        "app.kubernetes.io/instance": cfg.name,
        "app.kubernetes.io/part-of": "eu-ml-platform",
    }


def render_service(cfg: LaunchConfig) -> dict[str, Any]:
    """Headless Service: stable DNS for each indexed pod (pod 0 is the rendezvous host)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": cfg.name, "namespace": cfg.namespace, "labels": _labels(cfg)},
        "spec": {
            "clusterIP": "None",
            "selector": {"app.kubernetes.io/instance": cfg.name, "app.kubernetes.io/name": "training"},
            # The rendezvous happens before any pod could be Ready: DNS must answer for starting pods.
            "publishNotReadyAddresses": True,
            "ports": [{"name": "rdzv", "port": RDZV_PORT, "targetPort": RDZV_PORT, "protocol": "TCP"}],
        },
    }


def tolerations(cfg: LaunchConfig) -> list[dict[str, str]]:
    """The pool's tolerations plus the ones the cloud's own taints need (AKS spot)."""
    out = [dict(t) for t in cfg.tolerations]
    for extra in CLOUD_TOLERATIONS.get(cfg.cloud or "", ()):
        if extra not in out:
            out.append(dict(extra))
    return out


def pod_labels(cfg: LaunchConfig) -> dict[str, str]:
    """Labels the cloud's workload identity needs on the pod (Azure)."""
    return dict(CLOUD_POD_LABELS.get(cfg.cloud or "", {}))


def render_job(cfg: LaunchConfig) -> dict[str, Any]:
    environment = {
        envvars.TRAINING_CHECKPOINT_URI.name: cfg.checkpoint_uri,
        envvars.TRAINING_NODES.name: str(cfg.nodes),
        envvars.TRAINING_OUTPUT_DIR.name: cfg.output_dir,
        **({envvars.TRAINING_DATA_URI.name: cfg.data_uri} if cfg.data_uri else {}),
        **(
            {envvars.TRAINING_CLOUD.name: cfg.cloud, envvars.TRAINING_INTERRUPTION_PROVIDER.name: cfg.cloud}
            if cfg.cloud
            else {}
        ),
        # Lost peers surface in Python (exit 75) instead of a watchdog abort (134): training/distributed.py.
        envvars.TORCH_NCCL_ASYNC_ERROR_HANDLING.name: "2",
        envvars.TRAINING_MAX_PREEMPTIONS.name: str(cfg.max_preemptions),
        # Progress stamp for TrainingNoProgress (monitoring/progress.py), joined on the Job's name.
        **(
            {
                monitoring_env.MONITORING_PUSHGATEWAY_URL.name: cfg.pushgateway_url,
                monitoring_env.MONITORING_JOB_NAME.name: cfg.name,
            }
            if cfg.pushgateway_url
            else {}
        ),
        **cfg.env,
    }
    resources: dict[str, Any] = {
        "requests": {"cpu": cfg.cpu, "memory": cfg.memory},
        "limits": {"memory": cfg.memory},
    }
    if cfg.gpus_per_node:
        # Quantities are strings in the API types (the kubernetes client rejects a bare int).
        resources["requests"]["nvidia.com/gpu"] = str(cfg.gpus_per_node)
        resources["limits"]["nvidia.com/gpu"] = str(cfg.gpus_per_node)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": cfg.service_account,
        "subdomain": cfg.name,  # with the Indexed Job's hostname `<name>-<index>`: a DNS name per pod
        "terminationGracePeriodSeconds": cfg.termination_grace_s,
        "nodeSelector": dict(cfg.node_selector),
        "tolerations": tolerations(cfg),
        "containers": [
            {
                "name": CONTAINER,
                "image": cfg.image,
                "imagePullPolicy": "IfNotPresent",
                "command": trainer_command(cfg),
                "env": [{"name": k, "value": v} for k, v in environment.items()],
                "ports": [{"name": "rdzv", "containerPort": RDZV_PORT, "protocol": "TCP"}],
                "resources": resources,
                "volumeMounts": [
                    {"name": "dshm", "mountPath": "/dev/shm"},
                    {"name": "output", "mountPath": cfg.output_dir},
                ],
                # The image runs as a numeric non-root user (containers/training/Dockerfile).
                "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
            }
        ],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": cfg.shm_size}},
            {"name": "output", "emptyDir": {}},
        ],
    }
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": cfg.nodes,
        "parallelism": cfg.nodes,
        "backoffLimit": cfg.backoff_limit,
        # Replace a pod only once it is fully gone, so two pods never hold the same index/hostname.
        "podReplacementPolicy": "Failed",
        "podFailurePolicy": {
            "rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                {
                    "action": "Ignore",
                    "onExitCodes": {"containerName": CONTAINER, "operator": "In", "values": [EXIT_PREEMPTED]},
                },
                {
                    "action": "FailJob",
                    # 69 (object storage unavailable after retries) counts against backoffLimit instead.
                    "onExitCodes": {
                        "containerName": CONTAINER,
                        "operator": "NotIn",
                        "values": [0, EXIT_PREEMPTED, EXIT_STORAGE],
                    },
                },
            ]
        },
        "template": {"metadata": {"labels": {**_labels(cfg), **pod_labels(cfg)}}, "spec": pod_spec},
    }
    if cfg.ttl_after_finished_s is not None:
        spec["ttlSecondsAfterFinished"] = cfg.ttl_after_finished_s
    if cfg.active_deadline_s is not None:
        spec["activeDeadlineSeconds"] = cfg.active_deadline_s
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": cfg.name, "namespace": cfg.namespace, "labels": _labels(cfg)},
        "spec": spec,
    }


def render(cfg: LaunchConfig) -> list[dict[str, Any]]:
    """Service first: its DNS records must exist when pod 0 starts the rendezvous."""
    return [render_service(cfg), render_job(cfg)]


def to_yaml(manifests: Sequence[Mapping[str, Any]]) -> str:
    import yaml

    return yaml.safe_dump_all(list(manifests), sort_keys=False)


# --------------------------------------------------------------------------- apply


def apply(
    manifests: Sequence[Mapping[str, Any]], *, kubeconfig: str | None = None, context: str | None = None
) -> list[str]:
    """Create the Service (kept if it exists) and the Job through the Kubernetes API; returns what was done."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    config.load_kube_config(config_file=kubeconfig, context=context)
    api = client.ApiClient()
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    done = []
    for doc in manifests:
        ns, name, kind = doc["metadata"]["namespace"], doc["metadata"]["name"], doc["kind"]
        create = {"Service": core.create_namespaced_service, "Job": batch.create_namespaced_job}[kind]
        try:
            create(ns, doc)
            done.append(f"{kind.lower()}/{name} created")
        except ApiException as exc:
            # The Service of a previous run with the same name is reusable; a Job is not (its spec is immutable).
            if exc.status == 409 and kind == "Service":
                done.append(f"{kind.lower()}/{name} unchanged")
                continue
            raise
    return done


# The command line (register, flags -> LaunchConfig) lives in training/launch_cli.py; these names stay
# importable from here, resolved on first use (launch_cli imports this module).
_CLI_NAMES = ("register", "config_from_args", "image_from_build_record", "parse_toleration")


def __getattr__(name: str) -> Any:
    if name in _CLI_NAMES:
        from training import launch_cli

        return getattr(launch_cli, name)
    raise AttributeError(f"module 'training.launch' has no attribute {name!r}")
