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
  identity may write the checkpoint bucket) and the checkpoint URI in TRAINING_CHECKPOINT_URI; the optional
  Secret `mlflow` (--mlflow-secret) gives the trainer MLflow's own variables (MLFLOW_TRACKING_URI...) by envFrom.

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

from collections.abc import Mapping, Sequence
from typing import Any

from monitoring import environment as monitoring_env
from training import environment as envvars
from training.errors import EXIT_PREEMPTED, EXIT_STORAGE
from training.launch_config import (  # noqa: F401  (re-exported: launch_cli and tests read them from here)
    BUILD_RECORD,
    CLOUD_POD_LABELS,
    CLOUD_TOLERATIONS,
    CONTAINER,
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    DEFAULT_NODE_SELECTOR,
    DEFAULT_PUSHGATEWAY,
    DEFAULT_SERVICE_ACCOUNT,
    DEFAULT_TOLERATIONS,
    MLFLOW_SECRET,
    RDZV_PORT,
    LaunchConfig,
    mlflow_env_from,
)

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
        # Pod Security "restricted" (the trainer's namespace enforces it): a RuntimeDefault seccomp profile.
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "nodeSelector": dict(cfg.node_selector),
        "tolerations": tolerations(cfg),
        "containers": [
            {
                "name": CONTAINER,
                "image": cfg.image,
                "imagePullPolicy": "IfNotPresent",
                "command": trainer_command(cfg),
                # A team's MLflow server (MLFLOW_TRACKING_URI, its token...) from the optional Secret; `env` wins
                # over envFrom for a name in both, so an explicit --env MLFLOW_TRACKING_URI=... still decides.
                **({"envFrom": mlflow_env_from(cfg.mlflow_secret)} if cfg.mlflow_secret else {}),
                "env": [{"name": k, "value": v} for k, v in environment.items()],
                "ports": [{"name": "rdzv", "containerPort": RDZV_PORT, "protocol": "TCP"}],
                "resources": resources,
                "volumeMounts": [
                    {"name": "dshm", "mountPath": "/dev/shm"},
                    {"name": "output", "mountPath": cfg.output_dir},
                ],
                # The image runs as a numeric non-root user (containers/training/Dockerfile). The trainer's
                # namespace enforces Pod Security "restricted" (infra/k8s/workloads.py): without the dropped
                # capabilities and the pod's seccomp profile the admission refuses every pod of the Job.
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "runAsNonRoot": True,
                    "capabilities": {"drop": ["ALL"]},
                },
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
                    # The API server requires the values ascending and unique ("must be ordered").
                    "onExitCodes": {
                        "containerName": CONTAINER,
                        "operator": "NotIn",
                        "values": sorted({0, EXIT_PREEMPTED, EXIT_STORAGE}),
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
    creators: dict[str, Any] = {"Service": core.create_namespaced_service, "Job": batch.create_namespaced_job}
    done = []
    for doc in manifests:
        ns, name, kind = doc["metadata"]["namespace"], doc["metadata"]["name"], doc["kind"]
        create = creators[kind]
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
