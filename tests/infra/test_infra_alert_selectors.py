"""Every kube-state-metrics selector in the alert rules and the dashboards names objects each stack declares.

A rule whose namespace or object name matches nothing is silent forever, and promtool cannot tell: the series
simply never exist. The objects are those of the rendered plans (and the training Job `python -m training
launch` renders from a stack's outputs, which Pulumi does not own); label names are kube-state-metrics' own
(`deployment`, `horizontalpodautoscaler`, `cronjob`, `job_name`). DCGM's `namespace` label is the GPU pod's.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from infra_fixtures import STACKS, Plan, k8s_objects, launch_config

from infra.k8s.monitoring import alert_rule_groups, dashboards

# kube-state-metrics metric prefix -> (kind, label holding the object's name)
KSM = {
    "kube_deployment_": ("Deployment", "deployment"),
    "kube_horizontalpodautoscaler_": ("HorizontalPodAutoscaler", "horizontalpodautoscaler"),
    "kube_cronjob_": ("CronJob", "cronjob"),
    "kube_job_": ("Job", "job_name"),
    # Custom resource state series of the Argo Workflows (infra/k8s/workflow_state.py): the Workflows are made at run
    # time, from the WorkflowTemplate their `workflow_template` label names.
    "kube_customresource_argo_workflow_": ("WorkflowTemplate", "workflow_template"),
    # The CronWorkflow that creates those runs, by its own name.
    "kube_customresource_argo_cronworkflow_": ("CronWorkflow", "name"),
    # The stack's WorkflowTemplate itself, by its own name (the alert for a CronWorkflow deleted beside it).
    "kube_customresource_argo_workflowtemplate_": ("WorkflowTemplate", "name"),
}
SELECTOR = re.compile(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
# A `query` in an alert's annotation template (Go raw string): its selectors must name real objects too.
QUERY = re.compile(r"\bquery `([^`]*)`")


def expressions() -> list[tuple[str, str]]:
    """The alert rules (with the queries of their annotations) and dashboard panels exactly as infra puts them into
    every stack."""
    found = [
        (f"alert {rule['alert']}", rule["expr"])
        for group in alert_rule_groups()
        for rule in group["rules"]
        if "alert" in rule
    ]
    found += [
        (f"alert {rule['alert']} annotation {key}", query)
        for group in alert_rule_groups()
        for rule in group["rules"]
        for key, text in rule.get("annotations", {}).items()
        for query in QUERY.findall(text)
    ]
    for text in dashboards().values():
        for panel in json.loads(text)["panels"]:
            found += [(f"panel {panel['title']!r}", t["expr"]) for t in panel.get("targets", [])]
    return found


def selectors(expr: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    return [(metric, MATCHER.findall(body)) for metric, body in SELECTOR.findall(expr)]


def accepts(op: str, pattern: str, value: str) -> bool:
    """PromQL's matchers: regexes are fully anchored."""
    hit = re.fullmatch(pattern, value) is not None if op in ("=~", "!~") else pattern == value
    return hit if op in ("=", "=~") else not hit


def cluster_objects(plan: Plan) -> list[dict[str, Any]]:
    from training import launch

    return [*k8s_objects(plan), launch.render_job(launch_config(plan))]


def unmatched(plan: Plan, exprs: list[tuple[str, str]]) -> list[str]:
    objects = cluster_objects(plan)
    namespaces = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    problems = []
    for where, expr in exprs:
        for metric, matchers in selectors(expr):
            if not (metric.startswith("kube_") or metric.startswith("DCGM_")):
                continue
            kind, name_label = next(((k, n) for p, (k, n) in KSM.items() if metric.startswith(p)), ("", ""))
            ns = [(op, v) for label, op, v in matchers if label == "namespace"]
            names = [(op, v) for label, op, v in matchers if label == name_label]
            if ns and not any(all(accepts(op, v, n) for op, v in ns) for n in namespaces):
                problems.append(f"{where}: {metric} namespace {ns} matches none of {sorted(namespaces)}")
            if not kind:
                continue
            candidates = [
                o for o in objects
                if o["kind"] == kind
                and all(accepts(op, v, o["metadata"].get("namespace", "")) for op, v in ns)
                and all(accepts(op, v, o["metadata"]["name"]) for op, v in names)
            ]  # fmt: skip
            if not candidates:
                problems.append(f"{where}: {metric}{{{matchers}}} selects no {kind} of the stack")
    return problems


def test_the_expressions_select_cluster_objects_at_all() -> None:
    """The check has something to check: each kube-state-metrics family the rules use is seen."""
    seen = {
        p for _, expr in expressions() for metric, _ in selectors(expr) for p in KSM if metric.startswith(p)
    }
    assert seen == set(KSM)


@pytest.mark.parametrize("stack", STACKS)
def test_every_kube_state_metrics_selector_names_objects_of_the_stack(
    plans: dict[str, Plan], stack: str
) -> None:
    assert unmatched(plans[stack], expressions()) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('deployment="triton"', 'deployment="serving"'),
        ('namespace="serving",deployment', 'namespace="triton",deployment'),
        ('namespace=~"drift|cost"', 'namespace=~"drifts|costs"'),
        ('kube_job_status_active{namespace="training"}', 'kube_job_status_active{namespace="train"}'),
        (
            'cronworkflow_created{namespace="training",name=~"retrain-.+"}',
            'cronworkflow_created{namespace="training",name=~"retrain_.+"}',
        ),
        (
            'workflowtemplate_created{namespace="training",name=~"retrain-.+"}',
            'workflowtemplate_created{namespace="training",name=~"retraining-.+"}',
        ),
        # In an annotation's query only.
        (
            'cronworkflow_suspended{namespace="training",name=~',
            'cronworkflow_suspended{namespace="argo",name=~',
        ),
    ],
)
def test_a_selector_that_names_nothing_is_found(plans: dict[str, Plan], old: str, new: str) -> None:
    real = expressions()
    assert any(old in expr for _, expr in real), old
    assert unmatched(plans["dev"], [(w, e.replace(old, new)) for w, e in real])
