"""The retraining pipeline's state as kube-state-metrics series, read from the Argo Workflow, CronWorkflow and
WorkflowTemplate objects.

Why not Argo's own metrics: the controller keeps custom metrics in memory, so after a controller restart (a node
drain, an upgrade, an eviction) the last run's outcome is gone until the next run, and a failure before the restart
is forgotten. The Workflow objects live in etcd until their TTL (pipeline/argo.py WORKFLOW_RETENTION_S), so
kube-state-metrics' custom resource state metrics (CustomResourceStateMetrics, `--custom-resource-state-config-file`;
kubernetes/kube-state-metrics docs/metrics/extend/customresourcestate-metrics.md) read them again after any restart.

kube-state-metrics is the prometheus chart's subchart (infra/k8s/addons.py pins prometheus 25.27.0; its
kube-state-metrics dependency is chart 5.x, KSM v2.x): `customResourceState.enabled/config` become the ConfigMap and
the flag, `rbac.extraRules` the ClusterRole rules. Pure: no Pulumi resources here.

Series (the default prefix `kube_customresource_` + the metric's name; every series also carries KSM's
`customresource_group/version/kind` and the resource-level labels `name`, `namespace`, `workflow_template`):

- `kube_customresource_argo_workflow_status_phase{phase}` (StateSet: one series per phase in WORKFLOW_PHASES, 1 for
  the current one; none while the controller has not set a phase yet)
- `kube_customresource_argo_workflow_finished_time` (seconds since the epoch of `status.finishedAt`; absent while
  the run goes on)
- `kube_customresource_argo_workflow_node_started_time{node_id, template_name, node_type, node_phase}` (one per
  node of `status.nodes`: its `startedAt`, which Argo sets when it creates the node's pod, before the pod is scheduled)

and per CronWorkflow (resource-level labels `name`, `namespace`, `workflow_template` = the template its runs use):

- `kube_customresource_argo_cronworkflow_created` (seconds since the epoch of `metadata.creationTimestamp`)
- `kube_customresource_argo_cronworkflow_last_scheduled_time` (`status.lastScheduledTime`: the controller sets it only
  once it has created a run, so a schedule that creates none leaves it old; absent until the first run)
- `kube_customresource_argo_cronworkflow_suspended` (1 while `spec.suspend` is true, 0 otherwise, also when unset)

and per WorkflowTemplate (resource-level labels `name`, `namespace`):

- `kube_customresource_argo_workflowtemplate_created` (seconds since the epoch of `metadata.creationTimestamp`)

A CronWorkflow that creates no run (suspended, its WorkflowTemplate gone, a spec the controller refuses, every run
skipped behind a hung one by `concurrencyPolicy: Forbid`, the controller down) leaves no Workflow to read:
RetrainingPipelineStale counts from the last successful run, or from the CronWorkflow's creation, instead. A deleted
CronWorkflow takes the runs it created with it (their ownerReferences) and leaves no series at all: the stack's
WorkflowTemplate of the same name stays, and RetrainingCronWorkflowMissing fires on a template without its
CronWorkflow. Both deleted leave no series of the pipeline at all: RetrainingPipelineAbsent compares them with the
environment the stack declares (infra/k8s/monitoring.py PIPELINE_DECLARED).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ARGO_GROUP, ARGO_VERSION, WORKFLOW_KIND, CRON_KIND = "argoproj.io", "v1alpha1", "Workflow", "CronWorkflow"
TEMPLATE_KIND = "WorkflowTemplate"
METRIC_PREFIX = "kube_customresource"
# Argo's WorkflowPhase values (pkg/apis/workflow/v1alpha1/workflow_types.go); "" (not yet seen) gives no series.
WORKFLOW_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Error")
PHASE, FINISHED, NODE_STARTED = (
    "argo_workflow_status_phase",
    "argo_workflow_finished_time",
    "argo_workflow_node_started_time",
)
# Labels on every series of a Workflow. `workflow_template`: spec.workflowTemplateRef.name, which every run of the
# pipeline carries, scheduled (the CronWorkflow's workflowSpec) or resubmitted (`argo submit --from workflowtemplate/`).
RESOURCE_LABELS: Mapping[str, list[str]] = {
    "name": ["metadata", "name"],
    "namespace": ["metadata", "namespace"],
    "workflow_template": ["spec", "workflowTemplateRef", "name"],
}
CRON_CREATED, CRON_LAST_SCHEDULED, CRON_SUSPENDED = (
    "argo_cronworkflow_created",
    "argo_cronworkflow_last_scheduled_time",
    "argo_cronworkflow_suspended",
)
# The same label names as a Workflow's: the template is the CronWorkflow's workflowSpec.workflowTemplateRef.
CRON_LABELS: Mapping[str, list[str]] = {
    "name": ["metadata", "name"],
    "namespace": ["metadata", "namespace"],
    "workflow_template": ["spec", "workflowSpec", "workflowTemplateRef", "name"],
}
TEMPLATE_CREATED = "argo_workflowtemplate_created"
# No `workflow_template`: a template is one. The stack gives its CronWorkflow the template's name (pipeline/argo.py),
# and RetrainingCronWorkflowMissing joins the two kinds on `name`.
TEMPLATE_LABELS: Mapping[str, list[str]] = {
    "name": ["metadata", "name"],
    "namespace": ["metadata", "namespace"],
}
NODE_LABELS: Mapping[str, list[str]] = {
    "template_name": ["templateName"],
    "node_type": ["type"],
    "node_phase": ["phase"],
}
# KSM's own labels on every custom resource series (pkg/customresourcestate/registry_factory.go compile()).
GVK_LABELS = ("customresource_group", "customresource_version", "customresource_kind")
RBAC_RULES: tuple[Mapping[str, Any], ...] = (
    # KSM resolves the configured kinds through the CRDs (docs: "RBAC-enabled Clusters").
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["list", "watch"],
    },
    {
        "apiGroups": [ARGO_GROUP],
        "resources": ["workflows", "cronworkflows", "workflowtemplates"],
        "verbs": ["list", "watch"],
    },
)


def custom_resource_state_config() -> dict[str, Any]:
    """The CustomResourceStateMetrics document (the chart puts it in a ConfigMap and passes the file flag)."""
    return {
        "kind": "CustomResourceStateMetrics",
        "spec": {
            "resources": [
                {
                    "groupVersionKind": {"group": ARGO_GROUP, "version": ARGO_VERSION, "kind": WORKFLOW_KIND},
                    "labelsFromPath": {k: list(v) for k, v in RESOURCE_LABELS.items()},
                    "metrics": [
                        {
                            "name": PHASE,
                            "help": "Phase of the Argo Workflow (1 for the current one).",
                            "each": {
                                "type": "StateSet",
                                "stateSet": {
                                    "labelName": "phase",
                                    "path": ["status", "phase"],
                                    "list": list(WORKFLOW_PHASES),
                                },
                            },
                        },
                        {
                            "name": FINISHED,
                            "help": "When the Argo Workflow finished (seconds since the epoch); absent while it runs.",
                            # A path to a single RFC 3339 string: KSM parses it to seconds.
                            "each": {"type": "Gauge", "gauge": {"path": ["status", "finishedAt"]}},
                        },
                        {
                            "name": NODE_STARTED,
                            "help": "When each node (step, retry, pod) of the Argo Workflow started (seconds since the epoch).",
                            "each": {
                                "type": "Gauge",
                                "gauge": {
                                    # A map: one series per entry, keyed by the node's id.
                                    "path": ["status", "nodes"],
                                    "labelFromKey": "node_id",
                                    "labelsFromPath": {k: list(v) for k, v in NODE_LABELS.items()},
                                    "valueFrom": ["startedAt"],
                                },
                            },
                        },
                    ],
                },
                {
                    "groupVersionKind": {"group": ARGO_GROUP, "version": ARGO_VERSION, "kind": CRON_KIND},
                    "labelsFromPath": {k: list(v) for k, v in CRON_LABELS.items()},
                    "metrics": [
                        {
                            "name": CRON_CREATED,
                            "help": "When the Argo CronWorkflow was created (seconds since the epoch).",
                            "each": {"type": "Gauge", "gauge": {"path": ["metadata", "creationTimestamp"]}},
                        },
                        {
                            "name": CRON_LAST_SCHEDULED,
                            "help": "When the Argo CronWorkflow last created a Workflow (seconds since the epoch).",
                            "each": {"type": "Gauge", "gauge": {"path": ["status", "lastScheduledTime"]}},
                        },
                        {
                            "name": CRON_SUSPENDED,
                            "help": "1 while the Argo CronWorkflow is suspended (spec.suspend), else 0.",
                            # Argo omits `suspend: false`: without nilIsZero an active CronWorkflow would have no
                            # series, and "not suspended" could not be told from "not there".
                            "each": {
                                "type": "Gauge",
                                "gauge": {"path": ["spec", "suspend"], "nilIsZero": True},
                            },
                        },
                    ],
                },
                {
                    "groupVersionKind": {"group": ARGO_GROUP, "version": ARGO_VERSION, "kind": TEMPLATE_KIND},
                    "labelsFromPath": {k: list(v) for k, v in TEMPLATE_LABELS.items()},
                    "metrics": [
                        {
                            "name": TEMPLATE_CREATED,
                            "help": "When the Argo WorkflowTemplate was created (seconds since the epoch).",
                            "each": {"type": "Gauge", "gauge": {"path": ["metadata", "creationTimestamp"]}},
                        },
                    ],
                },
            ]
        },
    }


def metric_labels() -> dict[str, set[str]]:
    """Full metric name -> the label names kube-state-metrics gives its series (for checks of the rules)."""
    common = set(GVK_LABELS) | set(RESOURCE_LABELS)
    return {
        f"{METRIC_PREFIX}_{PHASE}": common | {"phase"},
        f"{METRIC_PREFIX}_{FINISHED}": common,
        f"{METRIC_PREFIX}_{NODE_STARTED}": common | {"node_id"} | set(NODE_LABELS),
        **{
            f"{METRIC_PREFIX}_{m}": set(GVK_LABELS) | set(CRON_LABELS)
            for m in (CRON_CREATED, CRON_LAST_SCHEDULED, CRON_SUSPENDED)
        },
        f"{METRIC_PREFIX}_{TEMPLATE_CREATED}": set(GVK_LABELS) | set(TEMPLATE_LABELS),
    }


def kube_state_metrics_values() -> dict[str, Any]:
    """The prometheus chart's `kube-state-metrics` subchart values that add the Argo objects' series."""
    return {
        # The chart's default, stated: every kube_* series of the rules comes from it.
        "enabled": True,
        "customResourceState": {"enabled": True, "config": custom_resource_state_config()},
        "rbac": {"extraRules": [dict(r) for r in RBAC_RULES]},
    }
