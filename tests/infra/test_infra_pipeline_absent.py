"""A stack's retraining pipeline deleted whole (its WorkflowTemplate and its CronWorkflow) pages, once.

Before, nothing fired: RetrainingCronWorkflowMissing needs the template, Failed and Stale the runs or the
CronWorkflow, and nothing in the cluster says which pipeline should exist. The stack says it: every stack deploys its
environment's pipeline (infra/program.py, argo.declare), and its Prometheus rules declare that environment
(`stack:retraining_pipeline:declared`), which RetrainingPipelineAbsent (monitoring/rules/training.yaml) reads.
Checked on the rules exactly as the plan renders them, with the real promtool, and on the stack's alertmanager.yml in
a real Alertmanager. The alert trusts kube-state-metrics' target: its outage is KubeStateMetricsDown's page, checked
here on the same rendered rules.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from infra_fixtures import STACKS, Plan
from promtool_rules import assert_rule_test_passes, prometheus_values, require_promtool, rules_of

from infra import plan as planner
from infra.k8s import monitoring
from pipeline import argo as render

KSM_UP = (
    'up{app_kubernetes_io_name="kube-state-metrics",instance="10.0.3.7:8080",job="kubernetes-service-endpoints",'
    'namespace="monitoring",service="prometheus-kube-state-metrics"}'
)


def pipeline_names(plan: Plan, kind: str) -> set[str]:
    token = f"kubernetes:{render.API_VERSION}:{kind}"
    return {r["inputs"]["metadata"]["name"] for r in plan.iter_custom() if r["type"] == token}


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_declares_the_environment_of_the_pipeline_it_deploys(
    plans: dict[str, Plan], stack: str
) -> None:
    declared = [
        rule["labels"]["environment"]
        for group in rules_of(plans[stack])["groups"]
        for rule in group["rules"]
        if rule.get("record") == "stack:retraining_pipeline:declared"
    ]
    templates = pipeline_names(plans[stack], "WorkflowTemplate")
    assert templates == pipeline_names(plans[stack], "CronWorkflow")
    assert [render.template_name(env) for env in declared] == sorted(templates), (declared, templates)
    assert declared == [planner.load_stack(stack).environment]


def _ksm(kind: str, name: str) -> str:
    metric = {"WorkflowTemplate": "workflowtemplate", "CronWorkflow": "cronworkflow"}[kind]
    labels = {"customresource_group": "argoproj.io", "customresource_kind": kind,
              "customresource_version": "v1alpha1", "name": name, "namespace": "training"}  # fmt: skip
    if kind == "CronWorkflow":
        labels["workflow_template"] = name
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"kube_customresource_argo_{metric}_created{{{body}}}"


@pytest.mark.integration
@pytest.mark.parametrize("stack", ["staging", "gcp-dev"])
def test_the_rendered_rules_fire_when_the_stacks_pipeline_is_deleted_whole(
    plans: dict[str, Plan], stack: str, tmp_path: Path
) -> None:
    """Both objects of the stack's environment deleted at 10m: firing after `for: 15m`. Another environment's
    objects vanishing (another cluster's pipeline, never deployed here) is not this stack's alert."""
    require_promtool()
    rules = rules_of(plans[stack])
    env = planner.load_stack(stack).environment
    other = "prod"
    (alert,) = [
        r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "RetrainingPipelineAbsent"
    ]
    series = [{"series": KSM_UP, "values": "1x40"}]
    for name in (render.template_name(env), render.template_name(other)):
        series += [
            {"series": _ksm(kind, name), "values": "0x9 stale"}
            for kind in ("WorkflowTemplate", "CronWorkflow")
        ]
    expected = {
        "exp_labels": {"severity": "warning", "owner": "ml", "environment": env},
        "exp_annotations": {
            k: v.replace("{{ $labels.environment }}", env) for k, v in alert["annotations"].items()
        },
    }
    checks = [
        {"eval_time": "24m", "alertname": "RetrainingPipelineAbsent", "exp_alerts": []},
        {"eval_time": "25m", "alertname": "RetrainingPipelineAbsent", "exp_alerts": [expected]},
    ]
    assert_rule_test_passes(rules, [(series, checks)], tmp_path)


@pytest.mark.integration
def test_the_stacks_alertmanager_sends_the_deleted_pipeline_once(tmp_path: Path) -> None:
    """Absent and Stale of one environment (runs made by hand outlive the deleted CronWorkflow): Stale is
    suppressed by Absent; another environment's Stale is still sent."""
    from alertmanager_api import alert_states

    sent = [("RetrainingPipelineAbsent", "dev"), ("RetrainingPipelineStale", "dev"),
            ("RetrainingPipelineStale", "staging")]  # fmt: skip
    alerts = [
        {"alertname": name, "environment": env, "severity": "warning", "owner": "ml"} for name, env in sent
    ]
    state = alert_states(monitoring.alertmanager_document(planner.load_stack("dev")), alerts, tmp_path)
    assert state == {
        ("RetrainingPipelineAbsent", "dev"): "active",
        ("RetrainingPipelineStale", "dev"): "suppressed",
        ("RetrainingPipelineStale", "staging"): "active",
    }


@pytest.mark.parametrize("stack", STACKS)
def test_the_chart_keeps_the_kubernetes_scrape_jobs_kube_state_metrics_down_counts_on(
    plans: dict[str, Plan], stack: str
) -> None:
    """KubeStateMetricsDown (monitoring/rules/exporters.yaml) counts a missing kube-state-metrics target only where
    the chart's default `kubernetes-apiservers`/`kubernetes-nodes` jobs exist; a stack that replaced the chart's
    scrape configuration would silence it (and lose `kubernetes-service-endpoints`, which scrapes kube-state-metrics)."""
    values = prometheus_values(plans[stack])
    assert "prometheus.yml" not in values.get("serverFiles", {}), "the chart's scrape jobs were replaced"
    assert values.get("kube-state-metrics", {}).get("enabled", True) is not False


@pytest.mark.integration
def test_the_rendered_rules_say_when_kube_state_metrics_is_gone_not_that_the_pipeline_is(
    plans: dict[str, Plan], tmp_path: Path
) -> None:
    """kube-state-metrics' Service deleted at 10m: every series it wrote goes with it, the pipeline's included.
    RetrainingPipelineAbsent must not read that as a deletion, and KubeStateMetricsDown says what happened."""
    require_promtool()
    rules = rules_of(plans["dev"])
    name = render.template_name(planner.load_stack("dev").environment)
    series = [
        {"series": KSM_UP, "values": "1x9 stale"},
        {"series": 'up{instance="10.0.0.10:443",job="kubernetes-apiservers"}', "values": "1x40"},
        *(
            {"series": _ksm(kind, name), "values": "0x9 stale"}
            for kind in ("WorkflowTemplate", "CronWorkflow")
        ),
    ]
    (alert,) = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "KubeStateMetricsDown"]
    down = {
        "exp_labels": {"severity": "critical", "owner": "platform"},
        "exp_annotations": {
            "summary": "kube-state-metrics has no scrape target (not deployed, or its Service is not scraped): "
            "every alert on Kubernetes objects is blind",
            "runbook": alert["annotations"]["runbook"],
        },
    }
    checks = [
        {"eval_time": "19m", "alertname": "KubeStateMetricsDown", "exp_alerts": []},
        {"eval_time": "20m", "alertname": "KubeStateMetricsDown", "exp_alerts": [down]},
        {"eval_time": "40m", "alertname": "RetrainingPipelineAbsent", "exp_alerts": []},
    ]
    assert_rule_test_passes(rules, [(series, checks)], tmp_path)
