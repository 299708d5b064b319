"""Prometheus metrics: the names monitoring exposes, the ones it reads, and the push from the jobs.

The drift and evaluate jobs are batch jobs (a CronJob), so they push their gauges to a Pushgateway
(`prometheus-pushgateway`, scraped by Prometheus with honor_labels) rather than serve /metrics:
a scrape would miss a job that ran for 20 s. The same gauges are always written to DIR/metrics.prom
(text exposition format) so a node-exporter textfile collector, or a person, can read them too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from monitoring.errors import InputError

DRIFT_JOB, QUALITY_JOB = "monitoring-drift", "monitoring-evaluate"

# What our code exposes (name -> who writes it). The rules and the dashboard may use these...
OWN = {
    "ml_drift_score": "python -m monitoring drift (share of drifted columns, 0..1)",
    "ml_drift_threshold": "python -m monitoring drift (the score above which drift is declared)",
    "ml_drift_detected": "python -m monitoring drift (0/1)",
    "ml_quality": "python -m monitoring evaluate (label metric=accuracy|f1|auc, on the labelled sample)",
    "ml_quality_reference": "python -m monitoring evaluate (the promoted model's training test metrics)",
    "ml_inference_records_written_total": "serving python model (Triton custom metric)",
    "ml_inference_records_dropped_total": "serving python model (Triton custom metric): sink too slow",
    "ml_inference_errors_total": "serving python model (Triton custom metric): error responses, label kind",
    "ml_training_last_progress_timestamp_seconds": "training job (pushed per logged step; label job_name)",
    "ml_training_step": "training job (the optimizer step of that stamp; label job_name)",
    "ml_budget_forecast_eur": "cost job (month-end forecast per stack)",
    "ml_budget_limit_eur": "cost job (the stack's budget.monthlyAmount, in EUR)",
}
# ...and these, which other exporters expose (as they name them upstream).
EXTERNAL = {
    "triton": (
        "nv_inference_request_success",
        "nv_inference_request_failure",
        "nv_inference_count",
        "nv_inference_exec_count",
        "nv_inference_queue_duration_us",
        "nv_inference_request_duration_us",
        "nv_inference_request_summary_us",  # with --metrics-config summary_latencies=true
    ),
    "kube-state-metrics": (
        "kube_horizontalpodautoscaler_status_current_replicas",
        "kube_horizontalpodautoscaler_status_desired_replicas",
        "kube_horizontalpodautoscaler_spec_max_replicas",
        "kube_job_status_failed",
        "kube_job_status_active",
        "kube_job_status_start_time",  # TrainingNoProgress: a stamp older than the Job belongs to an earlier run
        "kube_job_complete",
        "kube_cronjob_created",
        "kube_cronjob_next_schedule_time",
        "kube_cronjob_status_last_schedule_time",
        "kube_cronjob_status_last_successful_time",
        "kube_deployment_spec_replicas",
        "kube_deployment_status_replicas_available",
    ),
    # The Argo Workflow, CronWorkflow and WorkflowTemplate objects of the retraining pipeline, from kube-state-metrics'
    # custom resource state config (infra/k8s/workflow_state.py): they survive a controller restart, unlike the
    # controller's own gauge.
    "kube-state-metrics custom resources": (
        "kube_customresource_argo_workflow_status_phase",
        "kube_customresource_argo_workflow_finished_time",
        "kube_customresource_argo_workflow_node_started_time",
        # The CronWorkflow that creates the runs: RetrainingPipelineStale counts from its creation while no run
        # succeeded, and says whether it is suspended or when it last created a run.
        "kube_customresource_argo_cronworkflow_created",
        "kube_customresource_argo_cronworkflow_last_scheduled_time",
        "kube_customresource_argo_cronworkflow_suspended",
        # The WorkflowTemplate the stack declares beside it: present without its CronWorkflow, nothing schedules
        # retraining (RetrainingCronWorkflowMissing; the deleted CronWorkflow took its runs' series with it).
        "kube_customresource_argo_workflowtemplate_created",
    ),
    "dcgm-exporter": ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"),
    # The retraining WorkflowTemplate's own gauge (pipeline/argo.py PIPELINE_METRIC), which Argo's controller
    # serves with its custom-metric prefix; for dashboards (no alert reads it: gone after a controller restart).
    "argo-workflows": ("argo_workflows_ml_pipeline_succeeded",),
    # Prometheus's own per-target series: RetrainingPipelineAbsent reads kube-state-metrics' (never fire on its outage).
    "prometheus": ("up",),
    # The recording rule a stack that deploys the retraining pipeline adds (infra/k8s/monitoring.py stack_rule_group):
    # the environment the cluster should have a pipeline of, which no object says once both are deleted.
    "stack rules": ("stack:retraining_pipeline:declared",),
}
KNOWN = set(OWN) | {name for names in EXTERNAL.values() for name in names}


def _registry_with(gauges: dict[str, tuple[str, dict[str, str], float]]) -> Any:
    from prometheus_client import CollectorRegistry, Gauge

    registry = CollectorRegistry()
    made: dict[str, Any] = {}
    for key, (name, labels, value) in gauges.items():
        if name not in made:
            made[name] = Gauge(name, OWN[name], sorted(labels), registry=registry)
        made[name].labels(**labels).set(value)
        del key
    return registry


class PushError(InputError):
    """The Pushgateway refused or could not be reached: the CLIs exit 2 with this message, not a traceback."""


def export(
    job: str, grouping: dict[str, str], gauges: dict[str, tuple[str, dict[str, str], float]],
    *, out_dir: Path | None, pushgateway: str | None,
) -> None:  # fmt: skip
    """Write DIR/metrics.prom and, when a gateway is given, push (replacing this job+group's gauges)."""
    from prometheus_client import push_to_gateway, write_to_textfile

    from monitoring.outputs import replacing

    registry = _registry_with(gauges)
    if out_dir is not None:
        # write_to_textfile replaces the file whole already; through `replacing` a failed write is exit 2 naming it.
        with replacing(Path(out_dir) / "metrics.prom") as tmp:
            write_to_textfile(str(tmp), registry)
    if pushgateway:
        try:
            push_to_gateway(pushgateway, job=job, grouping_key=grouping, registry=registry, timeout=10)
        except OSError as exc:  # URLError, HTTPError (a 4xx/5xx answer), timeouts
            raise PushError(
                f"could not push the gauges of job {job} {grouping} to the Pushgateway {pushgateway} "
                f"({type(exc).__name__}: {exc}): the alert rules do not see this run; check "
                "MONITORING_PUSHGATEWAY_URL and that the gateway is up"
            ) from exc


def drift_gauges(
    model: str, score: float, threshold: float, detected: bool
) -> dict[str, tuple[str, dict[str, str], float]]:
    labels = {"model": model}
    return {
        "score": ("ml_drift_score", labels, score),
        "threshold": ("ml_drift_threshold", labels, threshold),
        "detected": ("ml_drift_detected", labels, float(detected)),
    }


def quality_gauges(
    model: str, measured: dict[str, float], reference: dict[str, float]
) -> dict[str, tuple[str, dict[str, str], float]]:
    out = {}
    for metric, value in measured.items():
        out[f"q-{metric}"] = ("ml_quality", {"model": model, "metric": metric}, float(value))
    for metric, value in reference.items():
        out[f"r-{metric}"] = ("ml_quality_reference", {"model": model, "metric": metric}, float(value))
    return out
