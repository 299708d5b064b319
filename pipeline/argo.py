"""The DAG of pipeline/dag.py rendered as an Argo WorkflowTemplate plus a CronWorkflow (pure dicts, no SDK).

Rendered from the same ``dag.STEPS`` the local runner executes: each step becomes a container template whose
args are the step's argv with ``{param}`` turned into ``{{workflow.parameters.param}}``; ``depends`` becomes
``"a.Succeeded && b.Succeeded"`` and ``when`` reads the condition step's ``flag`` output parameter (the flag
file the step writes). infra/k8s/argo.py declares these objects in every stack, with the stack's pinned
training image; ``python -m pipeline render`` prints them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from monitoring import environment as monitoring_env
from pipeline import dag
from training.launch_config import DEFAULT_PUSHGATEWAY, MLFLOW_SECRET, mlflow_env_from

API_VERSION = "argoproj.io/v1alpha1"
NAMESPACE = "training"
"""The trainer's namespace: its service account may read and write the buckets the steps use."""
SERVICE_ACCOUNT = "trainer"
WORK_MOUNT = "/work"
FLAG_PATH = "/tmp/flag"
WORK_VOLUME_SIZE = "20Gi"
# The `images` step reads the stack registry as the trainer's own cloud identity (pipeline/registry_auth.py;
# infra grants it read on the two image repositories, infra.shape.IMAGE_PULL), so nothing has to create this
# Secret. It stays an optional override (type kubernetes.io/dockerconfigjson, mounted as $DOCKER_CONFIG, used
# first when it has an entry for the registry host): for a registry outside the stack, e.g. a mirror.
REGISTRY_SECRET = "registry-credentials"
REGISTRY_CONFIG_DIR = "/etc/registry"
# A retrain a day in dev, a week elsewhere: drift needs a window of traffic to be meaningful.
SCHEDULES: Mapping[str, str] = {"dev": "0 3 * * *", "staging": "0 3 * * 1", "prod": "0 4 * * 1"}
TIMEZONE = "Europe/Madrid"
EXIT_PREEMPTED = 75
# A run takes minutes to about two hours (tune: trials x trial timeout, 8 x 15 min by default). One still going
# after 12 h waits on something that will not come (a GPU pod Pending with no spot capacity, a hung step), and
# with the CronWorkflow's concurrencyPolicy Forbid it would skip every later run in silence. At the deadline Argo
# fails the run (phase Failed), which RetrainingPipelineFailed reports.
RUN_DEADLINE_S = 12 * 3600
# How long a finished run's Workflow object stays (ttlStrategy). RetrainingPipelineFailed reads the phase of each
# environment's last finished Workflow from the object itself (kube-state-metrics, infra/k8s/workflow_state.py): a
# failed run must still exist when the next run is due and has finished (a week + the deadline in staging and prod),
# or the alert resolves on its own. Five weeks also cover a few skipped weekly runs. The CronWorkflow's history limits
# bound the count (7 + 7; they never delete the newest run), and the work volume goes at completion (volumeClaimGC).
WORKFLOW_RETENTION_S = 35 * 24 * 3600
# Each finished run also sets this gauge for its environment: 1 succeeded, 0 failed, errored or hit the deadline. The
# controller serves it as argo_workflows_<name> (Argo prefixes custom metrics), for dashboards only: it lives in the
# controller's memory and is gone after a controller restart until the next run, so no alert reads it.
PIPELINE_METRIC = "ml_pipeline_succeeded"
PIPELINE_METRIC_HELP = "1 if the last retraining pipeline run of the environment succeeded, 0 if not"
# The trainer's namespace enforces Pod Security "restricted" (infra/k8s/workloads.py), and Argo runs workflow pods
# as root unless told otherwise: without these the admission refuses every step's pod. The image's USER is numeric
# (containers/training/Dockerfile), as runAsNonRoot needs; Argo's own init/wait containers get theirs from the
# chart's `executor.securityContext` (infra/k8s/argo.py).
# fsGroup: the `work` volume is a fresh, root-owned PVC; without the image's group on it the first step, running as
# uid 10001, cannot write there ("Permission denied").
IMAGE_UID = 10001
POD_SECURITY: Mapping[str, Any] = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
    "fsGroup": IMAGE_UID,
    "fsGroupChangePolicy": "OnRootMismatch",
}
CONTAINER_SECURITY: Mapping[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
POOLS: Mapping[str, Mapping[str, Any]] = {
    "system": {"nodeSelector": {"platform.eu-ml/pool": "system"}, "tolerations": []},
    "gpu": {
        "nodeSelector": {"platform.eu-ml/pool": "gpu"},
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
        ],
    },
}

# The steps that talk to MLflow get the optional Secret `mlflow` (training/launch_config.py MLFLOW_SECRET: its keys are
# MLflow's own variables) by envFrom: train (the trainer's and a study's tracking, training/tracking.py) and promote
# (the registry version and the environment's alias, promotion/registry.py). No other step imports MLflow, so no
# other step sees its token. Without the Secret both fall back to files inside the pod, lost with it.
MLFLOW_STEPS = ("train", "promote")


def template_name(environment: str) -> str:
    return f"retrain-{environment}"


def _param(name: str) -> str:
    return name.replace("_", "-")


def _args(step: dag.Step) -> list[str]:
    values = {name: f"{{{{workflow.parameters.{_param(name)}}}}}" for name in dag.Params.names()}
    values.update(work=WORK_MOUNT, flag_file=FLAG_PATH)
    return [part.format(**values) for part in step.command]


def _container_template(
    step: dag.Step,
    images: Mapping[str, str],
    preset: str,
    pools: Mapping[str, Mapping[str, Any]],
    pushgateway_url: str | None = None,
) -> dict[str, Any]:
    gpu = step.name == "train" and preset == "gpu"
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "8Gi"}}
    if gpu:
        resources = {
            "requests": {"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": "1"},
            "limits": {"memory": "12Gi", "nvidia.com/gpu": "1"},
        }
    args = _args(step)
    template: dict[str, Any] = {
        "name": step.name,
        "container": {
            "image": images[step.image],
            "command": args[:1],
            "args": args[1:],
            "volumeMounts": [{"name": "work", "mountPath": WORK_MOUNT}],
            "resources": resources,
            "securityContext": copy.deepcopy(dict(CONTAINER_SECURITY)),
        },
        **{
            k: list(v) if k == "tolerations" else dict(v)
            for k, v in pools["gpu" if gpu else "system"].items()
        },
    }
    if not template["tolerations"]:
        del template["tolerations"]
    if step.name == "images":
        template["container"]["env"] = [{"name": "DOCKER_CONFIG", "value": REGISTRY_CONFIG_DIR}]
        template["container"]["volumeMounts"].append(
            {"name": REGISTRY_SECRET, "mountPath": REGISTRY_CONFIG_DIR, "readOnly": True}
        )
    if step.name in MLFLOW_STEPS:
        template["container"]["envFrom"] = mlflow_env_from(MLFLOW_SECRET)
    if step.condition:
        template["outputs"] = {"parameters": [{"name": "flag", "valueFrom": {"path": FLAG_PATH}}]}
    if step.name == "train" and pushgateway_url:
        # The trainer's progress stamp (monitoring/progress.py), grouped by the run's name: RetrainingTrainStepNoProgress
        # joins it with the run's running train pod (kube-state-metrics' Workflow series carry the same name).
        template["container"]["env"] = [
            {"name": monitoring_env.MONITORING_PUSHGATEWAY_URL.name, "value": pushgateway_url},
            {"name": monitoring_env.MONITORING_JOB_NAME.name, "value": "{{workflow.name}}"},
        ]
    if step.name == "train":
        # Exit 75: preempted after a checkpoint; the retry resumes from it (training/README.md).
        template["retryStrategy"] = {
            "limit": "10",
            "retryPolicy": "Always",
            "expression": f"lastRetry.exitCode == '{EXIT_PREEMPTED}'",
        }
    return template


def _task(step: dag.Step) -> dict[str, Any]:
    task: dict[str, Any] = {"name": step.name, "template": step.name}
    if step.depends:
        task["depends"] = " && ".join(f"{d}.Succeeded" for d in step.depends)
    if step.when:
        task["when"] = f"{{{{tasks.{step.when}.outputs.parameters.flag}}}} == true"
    return task


def workflow_template(
    *,
    training_image: str,
    environment: str,
    params: dag.Params,
    pod_labels: Mapping[str, str] | None = None,
    pools: Mapping[str, Mapping[str, Any]] = POOLS,
    pushgateway_url: str | None = DEFAULT_PUSHGATEWAY,
) -> dict[str, Any]:
    """``pushgateway_url``: where the train step pushes its progress stamp (None: no stamp); the in-cluster
    Pushgateway of every stack by default. ``pod_labels`` and ``pools`` come from the stack (infra/k8s/argo.py): the labels a pod needs to get the
    trainer's cloud identity (AKS workload identity injects its token only into pods labelled
    ``azure.workload.identity/use``), and each pool's node selector with the tolerations of every taint its nodes
    carry (AKS taints spot nodes itself). The defaults are the cloud-neutral ones."""
    dag.check()
    images = {"training": training_image}
    values = {
        **dataclasses.asdict(params),
        "work": WORK_MOUNT,
        "env": environment,
        "local": "false",
        "training_image": training_image,
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkflowTemplate",
        "metadata": _metadata(environment),
        "spec": {
            "entrypoint": "retrain",
            "serviceAccountName": SERVICE_ACCOUNT,
            "securityContext": copy.deepcopy(dict(POD_SECURITY)),
            **({"podMetadata": {"labels": dict(pod_labels)}} if pod_labels else {}),
            "arguments": {"parameters": [{"name": _param(k), "value": str(v)} for k, v in values.items()]},
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "work"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": WORK_VOLUME_SIZE}},
                    },
                }
            ],
            "volumes": [
                {
                    "name": REGISTRY_SECRET,
                    "secret": {
                        "secretName": REGISTRY_SECRET,
                        "optional": True,
                        "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
                    },
                }
            ],
            "podGC": {"strategy": "OnWorkflowSuccess"},
            # Argo's default (OnWorkflowSuccess) would keep a failed run's 20Gi volume for as long as the run is kept;
            # a resubmitted run starts from the buckets, not from this volume.
            "volumeClaimGC": {"strategy": "OnWorkflowCompletion"},
            "ttlStrategy": {"secondsAfterCompletion": WORKFLOW_RETENTION_S},
            "activeDeadlineSeconds": RUN_DEADLINE_S,
            "metrics": {"prometheus": [_outcome_gauge(environment, ok) for ok in (True, False)]},
            "templates": [
                {"name": "retrain", "dag": {"tasks": [_task(s) for s in dag.STEPS]}},
                *(_container_template(s, images, params.preset, pools, pushgateway_url) for s in dag.STEPS),
            ],
        },
    }


def _outcome_gauge(environment: str, succeeded: bool) -> dict[str, Any]:
    """Workflow-level metrics are emitted once the run ends; `when` picks the value (same name and help: one
    series per environment)."""
    return {
        "name": PIPELINE_METRIC,
        "help": PIPELINE_METRIC_HELP,
        "labels": [{"key": "environment", "value": environment}],
        "when": f"{{{{workflow.status}}}} {'==' if succeeded else '!='} Succeeded",
        "gauge": {"value": "1" if succeeded else "0", "realtime": False},
    }


def _metadata(environment: str) -> dict[str, Any]:
    """The WorkflowTemplate and its CronWorkflow share a name: the CronWorkflow runs that template."""
    return {
        "name": template_name(environment),
        "namespace": NAMESPACE,
        "labels": {"app.kubernetes.io/part-of": "eu-ml-platform", "platform.eu-ml/environment": environment},
    }


def cron_workflow(environment: str, schedule: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "CronWorkflow",
        "metadata": _metadata(environment),
        "spec": {
            "schedules": [schedule or SCHEDULES.get(environment, SCHEDULES["staging"])],
            "timezone": TIMEZONE,
            # One retrain at a time: a second would race for the same promotion.
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 3600,
            "successfulJobsHistoryLimit": 7,
            "failedJobsHistoryLimit": 7,
            "workflowSpec": {"workflowTemplateRef": {"name": template_name(environment)}},
        },
    }


def render(
    *, training_image: str, environment: str, params: dag.Params, schedule: str | None = None
) -> list[dict[str, Any]]:
    return [
        workflow_template(training_image=training_image, environment=environment, params=params),
        cron_workflow(environment, schedule),
    ]


def to_yaml(docs: list[dict[str, Any]]) -> str:
    import yaml

    return yaml.safe_dump_all(docs, sort_keys=False)
