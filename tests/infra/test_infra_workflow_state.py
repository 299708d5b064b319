"""kube-state-metrics reads the retraining pipeline's Argo Workflows, CronWorkflows and WorkflowTemplates
(infra/k8s/workflow_state.py), and the alerts read exactly the series that config produces.

Checked without a cluster: every stack's rendered prometheus chart values carry the config and the RBAC rules; the
config is held to the structure kube-state-metrics decodes (pkg/customresourcestate config.go and
config_metrics_types.go: KSM decodes YAML leniently, so a misspelt key would be ignored in silence, not refused); its
paths are fields of Argo's own Workflow, CronWorkflow and WorkflowTemplate schemas (hera's models, generated from
argo-workflows 4.0.5's JSON schema); a Workflow, a CronWorkflow and a WorkflowTemplate as the cluster holds them, run
through the config with KSM's documented semantics, give the series names and labels that the promtool tests feed the
rules; and every such selector in the rules (and in their annotations' queries) names labels those series have.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from infra_fixtures import STACKS, Plan
from test_infra_alert_selectors import MATCHER, SELECTOR, expressions, unmatched

from infra.k8s import workflow_state as ws
from infra.k8s.monitoring import PUSHGATEWAY_URL
from pipeline import argo as render
from pipeline import dag

ROOT = Path(__file__).resolve().parents[2]
RULE_TESTS = sorted((ROOT / "tests" / "monitoring" / "rules").glob("*.test.yaml"))
K8S_VERSION = "1.33"
hera = pytest.importorskip(
    "hera.workflows.models", reason="hera (Argo's schema as models) is a dev dependency"
)

# The fields of each struct kube-state-metrics decodes (yaml tags), v2.9 and later.
LABELS_KEYS = {"labelsFromPath", "commonLabels"}
RESOURCE_KEYS = LABELS_KEYS | {
    "groupVersionKind",
    "metricNamePrefix",
    "resourcePlural",
    "metrics",
    "errorLogV",
}
GENERATOR_KEYS = LABELS_KEYS | {"each", "name", "help", "errorLogV"}
EACH_KEYS = {"gauge": {"path", "labelsFromPath", "labelFromKey", "valueFrom", "nilIsZero"},
             "stateset": {"path", "labelsFromPath", "list", "labelName", "valueFrom"},
             "info": {"path", "labelsFromPath", "labelFromKey"}}  # fmt: skip
EACH_FIELD = {"gauge": "gauge", "stateset": "stateSet", "info": "info"}
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def config_problems(doc: Any) -> list[str]:
    """What kube-state-metrics would ignore or refuse in a CustomResourceStateMetrics document."""
    problems: list[str] = []

    def keys(where: str, obj: Any, allowed: set[str], required: set[str] | None = None) -> bool:
        if not isinstance(obj, dict):
            problems.append(f"{where}: expected a mapping, got {type(obj).__name__}")
            return False
        problems.extend(
            f"{where}: unknown key {k!r} (kube-state-metrics ignores it)" for k in set(obj) - allowed
        )
        problems.extend(f"{where}: missing {k!r}" for k in (required or set()) - set(obj))
        return True

    def path(where: str, value: Any) -> None:
        if not (isinstance(value, list) and all(isinstance(p, str) for p in value)):
            problems.append(f"{where}: a path is a list of strings, got {value!r}")

    def labels(where: str, obj: dict[str, Any]) -> None:
        for name, p in (obj.get("labelsFromPath") or {}).items():
            if not LABEL.fullmatch(name.strip("*")) and name != "*":
                problems.append(f"{where}.labelsFromPath: {name!r} is no label name")
            path(f"{where}.labelsFromPath.{name}", p)

    if not keys("document", doc, {"kind", "spec"}, {"spec"}) or not keys("spec", doc["spec"], {"resources"}):
        return problems
    if doc.get("kind", "CustomResourceStateMetrics") != "CustomResourceStateMetrics":
        problems.append(f"kind: {doc['kind']!r}")
    for i, res in enumerate(doc["spec"]["resources"]):
        where = f"resources[{i}]"
        if not keys(where, res, RESOURCE_KEYS, {"groupVersionKind", "metrics"}):
            continue
        keys(
            f"{where}.groupVersionKind",
            res["groupVersionKind"],
            {"group", "version", "kind"},
            {"group", "version", "kind"},
        )
        labels(where, res)
        prefix = res.get("metricNamePrefix", ws.METRIC_PREFIX)
        for j, gen in enumerate(res["metrics"]):
            w = f"{where}.metrics[{j}]"
            if not keys(w, gen, GENERATOR_KEYS, {"name", "each"}):
                continue
            if not NAME.fullmatch(f"{prefix}_{gen['name']}" if prefix else gen["name"]):
                problems.append(f"{w}: {gen['name']!r} makes no valid metric name")
            labels(w, gen)
            kind = str(gen["each"].get("type", "")).lower()
            if kind not in EACH_KEYS:
                problems.append(f"{w}.each.type: {gen['each'].get('type')!r} is not Gauge, StateSet or Info")
                continue
            keys(f"{w}.each", gen["each"], {"type", EACH_FIELD[kind]}, {"type", EACH_FIELD[kind]})
            body = gen["each"].get(EACH_FIELD[kind], {})
            required = {"labelName", "list"} if kind == "stateset" else set()
            if keys(f"{w}.each.{EACH_FIELD[kind]}", body, EACH_KEYS[kind], required):
                for field in ("path", "valueFrom"):
                    if field in body:
                        path(f"{w}.each.{field}", body[field])
                labels(f"{w}.each", body)
    return problems


def get(obj: Any, path: list[str]) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def to_float(value: Any) -> float:
    """KSM's toFloat64 for what these paths hold: numbers, booleans (1/0) and RFC 3339 times."""
    if isinstance(value, str):
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return float(value)


def ksm_series(config: dict[str, Any], obj: dict[str, Any]) -> list[tuple[str, dict[str, str], float]]:
    """The series kube-state-metrics exposes for one object of a configured kind (registry_factory.go, the subset the
    config uses: a single value or a map per Gauge, a missing value 0 with nilIsZero and no series without, a StateSet
    over a single string; labels: GVK, resource, per-element, labelFromKey)."""
    out = []
    for res in config["spec"]["resources"]:
        gvk = res["groupVersionKind"]
        if f"{gvk['group']}/{gvk['version']}" != obj["apiVersion"] or gvk["kind"] != obj["kind"]:
            continue
        base = {"customresource_group": gvk["group"], "customresource_version": gvk["version"],
                "customresource_kind": gvk["kind"]}  # fmt: skip
        base |= {
            k: str(v) for k, p in res.get("labelsFromPath", {}).items() if (v := get(obj, p)) is not None
        }
        for gen in res["metrics"]:
            name = f"{res.get('metricNamePrefix', ws.METRIC_PREFIX)}_{gen['name']}"
            kind = gen["each"]["type"].lower()
            body = gen["each"][EACH_FIELD[kind]]
            at = get(obj, body.get("path", []))
            if kind == "stateset":
                if isinstance(at, str):
                    out += [(name, {**base, body["labelName"]: s}, float(at == s)) for s in body["list"]]
                continue
            elements = at.items() if isinstance(at, dict) else [("", at)]
            for key, element in elements:
                value = get(element, body.get("valueFrom", []))
                if value is None and body.get("nilIsZero"):
                    value = 0
                elif value is None:
                    continue
                own = {
                    k: str(v)
                    for k, p in body.get("labelsFromPath", {}).items()
                    if (v := get(element, p)) is not None
                }
                if key and body.get("labelFromKey"):
                    own[body["labelFromKey"]] = key
                out.append((name, {**base, **own}, to_float(value)))
    return out


def workflow(name: str, *, phase: str, finished: bool) -> dict[str, Any]:
    """A scheduled run as Argo's controller writes it, checked against Argo's schema."""
    node = {"id": f"{name}-1", "name": f"{name}.train(0)", "displayName": "train(0)", "type": "Pod",
            "templateName": "train", "phase": "Running", "startedAt": "2026-12-07T03:00:05Z"}  # fmt: skip
    doc = {
        "apiVersion": render.API_VERSION,
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": render.NAMESPACE,
                     "labels": {"workflows.argoproj.io/cron-workflow": render.template_name("dev")}},
        "spec": {"workflowTemplateRef": {"name": render.template_name("dev")}},
        "status": {"phase": phase, "startedAt": "2026-12-07T03:00:00Z", "nodes": {node["id"]: node},
                   **({"finishedAt": "2026-12-07T04:00:00Z"} if finished else {})},
    }  # fmt: skip
    hera.Workflow.model_validate(doc)
    return doc


def cron_workflow(*, suspend: bool | None, scheduled: bool) -> dict[str, Any]:
    """The rendered CronWorkflow as the API server and the controller leave it, checked against Argo's schema."""
    doc = render.cron_workflow("dev")
    doc["metadata"]["creationTimestamp"] = "2026-12-01T10:00:00Z"
    if suspend is not None:  # `argo cron suspend` sets it; Argo omits it while false
        doc["spec"]["suspend"] = suspend
    doc["status"] = {"lastScheduledTime": "2026-12-07T02:00:00Z"} if scheduled else {}
    hera.CronWorkflow.model_validate(doc)
    return doc


def workflow_template() -> dict[str, Any]:
    """The rendered WorkflowTemplate as the API server keeps it, checked against Argo's schema."""
    doc = render.workflow_template(
        training_image="reg.example/mlp/training@sha256:" + "1" * 64, environment="dev", params=dag.Params()
    )
    doc["metadata"]["creationTimestamp"] = "2026-12-01T10:00:00Z"
    hera.WorkflowTemplate.model_validate(doc)
    return doc


def prometheus_values(plan: Plan) -> dict[str, Any]:
    (release,) = [
        r["inputs"] for r in plan.iter_custom()
        if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"]["chart"] == "prometheus"
    ]  # fmt: skip
    return release["values"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_gives_kube_state_metrics_the_workflow_config_and_may_read_workflows(
    plans: dict[str, Plan], stack: str
) -> None:
    ksm = prometheus_values(plans[stack])["kube-state-metrics"]
    assert ksm["enabled"] is True
    assert ksm["customResourceState"] == {"enabled": True, "config": ws.custom_resource_state_config()}
    rules = ksm["rbac"]["extraRules"]
    for group, resource in (
        ("argoproj.io", "workflows"),
        ("argoproj.io", "cronworkflows"),
        ("argoproj.io", "workflowtemplates"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
    ):
        assert any(group in r["apiGroups"] and resource in r["resources"] and {"list", "watch"} <= set(r["verbs"])
                   for r in rules), f"{stack}: kube-state-metrics may not list/watch {resource}.{group}"  # fmt: skip
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "ksm"}}
    kubernetes_validate.validate({**role, "rules": rules}, K8S_VERSION, strict=True)


def test_the_config_has_the_structure_kube_state_metrics_decodes() -> None:
    config = ws.custom_resource_state_config()
    assert config_problems(config) == []
    gvks = [res["groupVersionKind"] for res in config["spec"]["resources"]]
    assert {f"{g['group']}/{g['version']}" for g in gvks} == {render.API_VERSION}
    assert [g["kind"] for g in gvks] == ["Workflow", "CronWorkflow", "WorkflowTemplate"]
    # KSM lists a kind by its plural (lower-cased kind + "s" unless resourcePlural says otherwise): what RBAC grants.
    granted = {r for rule in ws.RBAC_RULES if ws.ARGO_GROUP in rule["apiGroups"] for r in rule["resources"]}
    assert {g["kind"].lower() + "s" for g in gvks} <= granted


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda c: c["spec"]["resources"][0].update(labelsFromPaths={}), "unknown key 'labelsFromPaths'"),
        (lambda c: c["spec"]["resources"][0]["metrics"][0]["each"].update(type="Counter"), "not Gauge"),
        (lambda c: c["spec"]["resources"][0]["metrics"][0]["each"]["stateSet"].pop("labelName"), "missing"),
        (
            lambda c: c["spec"]["resources"][0]["metrics"][1]["each"]["gauge"].update(
                path="status.finishedAt"
            ),
            "list",
        ),
        (
            lambda c: c["spec"]["resources"][1]["metrics"][2]["each"]["gauge"].update(nilIszero=True),
            "unknown key 'nilIszero'",
        ),
    ],
)
def test_a_config_kube_state_metrics_would_misread_is_refused(mutate: Any, problem: str) -> None:
    config = ws.custom_resource_state_config()
    mutate(config)
    assert any(problem in p for p in config_problems(config)), config_problems(config)


def test_every_path_is_a_field_of_argos_workflow_schema() -> None:
    def walk(model: Any, path: list[str]) -> None:
        for part in path:
            fields = {f.alias or n: f for n, f in model.model_fields.items()}
            assert part in fields, f"{path}: {part!r} is no field of {model.__name__}"
            annotation = fields[part].annotation
            args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
            model = args[0] if args else annotation
            if getattr(model, "__origin__", None) is dict:
                model = model.__args__[1]  # a map (status.nodes): what follows is per element

    models = {kind: getattr(hera, kind) for kind in ("Workflow", "CronWorkflow", "WorkflowTemplate")}
    for res in ws.custom_resource_state_config()["spec"]["resources"]:
        model = models[res["groupVersionKind"]["kind"]]
        for p in res["labelsFromPath"].values():
            walk(model, p)
        for gen in res["metrics"]:
            body = next(iter(v for k, v in gen["each"].items() if k != "type"))
            walk(model, body["path"])
            for p in [*body.get("labelsFromPath", {}).values(), body.get("valueFrom", [])]:
                walk(hera.NodeStatus if body["path"] == ["status", "nodes"] else hera.WorkflowStatus, p)


def test_a_workflow_gives_the_series_the_rule_tests_feed_the_rules() -> None:
    config = ws.custom_resource_state_config()
    running = ksm_series(config, workflow("retrain-dev-1", phase="Running", finished=False))
    failed = ksm_series(config, workflow("retrain-dev-2", phase="Failed", finished=True))
    cron = ksm_series(config, cron_workflow(suspend=None, scheduled=True))
    template = ksm_series(config, workflow_template())
    made = {name: set(labels) for name, labels, _ in running + failed + cron + template}
    assert made == ws.metric_labels()
    # No finish time while the run goes on; the phase is a StateSet with the current phase at 1.
    assert {n for n, _, _ in running} == {
        f"kube_customresource_{ws.PHASE}",
        f"kube_customresource_{ws.NODE_STARTED}",
    }
    phases = {labels["phase"]: v for n, labels, v in failed if n.endswith(ws.PHASE)}
    assert phases == {p: float(p == "Failed") for p in ws.WORKFLOW_PHASES}
    (finished,) = [v for n, _, v in failed if n.endswith(ws.FINISHED)]
    assert finished == dt.datetime(2026, 12, 7, 4, tzinfo=dt.UTC).timestamp()
    (node,) = [labels for n, labels, _ in failed if n.endswith(ws.NODE_STARTED)]
    assert node["name"] == "retrain-dev-2" and node["workflow_template"] == "retrain-dev"
    assert (node["template_name"], node["node_type"], node["node_phase"]) == ("train", "Pod", "Running")
    # The CronWorkflow's series carry the template its runs use, under the Workflow series' label name.
    assert {labels["workflow_template"] for n, labels, _ in cron} == {render.template_name("dev")}
    # The WorkflowTemplate's creation, under its CronWorkflow's name: RetrainingCronWorkflowMissing joins them on it.
    ((_, labels, created),) = template
    assert created == dt.datetime(2026, 12, 1, 10, tzinfo=dt.UTC).timestamp()
    assert {c["name"] for _, c, _ in cron} == {labels["name"]} == {render.template_name("dev")}
    # The promtool tests feed series of exactly that shape.
    fed = [
        series["series"]
        for path in RULE_TESTS
        for case in yaml.safe_load(path.read_text())["tests"]
        for series in case.get("input_series", [])
        if series["series"].startswith("kube_customresource_")
    ]
    assert fed
    for text in fed:
        ((metric, body),) = SELECTOR.findall(text)
        assert {label for label, _, _ in MATCHER.findall(body)} in (
            made[metric],
            made[metric] - {"workflow_template"},  # a Workflow from no template
        ), text


def test_a_cronworkflow_says_when_it_was_made_last_ran_and_whether_it_is_suspended() -> None:
    """No run to read when the schedule creates none: the CronWorkflow itself must say so. An active one must still
    have its suspended series (0): Argo omits `suspend: false`, and a missing series reads as "no CronWorkflow"."""
    config = ws.custom_resource_state_config()

    def values(**kwargs: Any) -> dict[str, float]:
        return {
            n.removeprefix(f"{ws.METRIC_PREFIX}_"): v
            for n, _, v in ksm_series(config, cron_workflow(**kwargs))
        }

    made = dt.datetime(2026, 12, 1, 10, tzinfo=dt.UTC).timestamp()
    scheduled = dt.datetime(2026, 12, 7, 2, tzinfo=dt.UTC).timestamp()
    assert values(suspend=None, scheduled=True) == {
        ws.CRON_CREATED: made, ws.CRON_LAST_SCHEDULED: scheduled, ws.CRON_SUSPENDED: 0.0}  # fmt: skip
    assert values(suspend=True, scheduled=True)[ws.CRON_SUSPENDED] == 1.0
    assert values(suspend=False, scheduled=True)[ws.CRON_SUSPENDED] == 0.0
    # No run created yet: no lastScheduledTime series (nilIsZero would read as a run in 1970).
    assert values(suspend=None, scheduled=False) == {ws.CRON_CREATED: made, ws.CRON_SUSPENDED: 0.0}


def test_the_rules_select_only_labels_the_workflow_series_have() -> None:
    made = ws.metric_labels()
    seen = set()
    for where, expr in expressions():
        for metric, body in SELECTOR.findall(expr):
            if metric.startswith("kube_customresource_"):
                seen.add(metric)
                assert metric in made, f"{where}: {metric} is no series of the config"
                used = {label for label, _, _ in MATCHER.findall(body)}
                assert used <= made[metric], f"{where}: {metric} has no label {used - made[metric]}"
    assert seen == set(made)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('workflow_template=~"retrain-.+"', 'workflow_template=~"retraining-.+"'),
        ('namespace="training",workflow_template', 'namespace="argo",workflow_template'),
    ],
)
def test_a_workflow_selector_that_names_nothing_is_found(plans: dict[str, Plan], old: str, new: str) -> None:
    real = expressions()
    assert any(old in expr for _, expr in real), old
    assert unmatched(plans["dev"], [(w, e.replace(old, new)) for w, e in real])


@pytest.mark.parametrize("stack", STACKS)
def test_the_train_step_pushes_its_stamp_to_the_stacks_pushgateway(
    plans: dict[str, Plan], stack: str
) -> None:
    (template,) = [
        r["inputs"] for r in plans[stack].iter_custom()
        if r["type"] == f"kubernetes:{render.API_VERSION}:WorkflowTemplate"
    ]  # fmt: skip
    train = next(t for t in template["spec"]["templates"] if t["name"] == "train")
    env = {e["name"]: e["value"] for e in train["container"]["env"]}
    assert env == {"MONITORING_PUSHGATEWAY_URL": PUSHGATEWAY_URL, "MONITORING_JOB_NAME": "{{workflow.name}}"}
    assert template["spec"]["ttlStrategy"]["secondsAfterCompletion"] == render.WORKFLOW_RETENTION_S
