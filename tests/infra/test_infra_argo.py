"""The retraining pipeline in every stack's plan: Argo's pinned chart on the system pool, and a WorkflowTemplate
plus CronWorkflow that are valid against Argo's own schema and run the stack's pinned training image.

Argo's schema: hera 7.1's pydantic models are generated from argo-workflows-4.0.5.json (the API of the pinned
chart's Argo). A model parse rejects wrong types; unknown fields are dropped by the models, so the objects must
also survive a round trip unchanged (a misspelt field would vanish and fail the comparison).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from infra_fixtures import STACKS, Plan

from infra import plan as planner
from infra.k8s import argo as infra_argo
from infra.k8s.monitoring import alert_rule_groups
from infra.shape import POOL_SELECTORS
from pipeline import argo, dag

hera = pytest.importorskip(
    "hera.workflows.models", reason="hera (Argo's schema as models) is a dev dependency"
)


def _ints(value: Any) -> Any:
    """The mock engine's numbers are floats (7.0); the provider sends integral ones as integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def argo_objects(plan: Plan) -> dict[str, dict[str, Any]]:
    found = {}
    for r in plan.iter_custom():
        if r["type"].startswith("kubernetes:argoproj.io/v1alpha1:"):
            doc = _ints(r["inputs"])
            found[doc["kind"]] = doc
    return found


def assert_valid_argo(doc: dict[str, Any]) -> None:
    model = getattr(hera, doc["kind"]).model_validate(doc)
    back = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert json.dumps(back, sort_keys=True) == json.dumps(doc, sort_keys=True), (
        f"{doc['kind']} has fields Argo's schema does not know"
    )


@pytest.mark.parametrize("stack", STACKS)
def test_plan_declares_a_valid_pipeline_running_the_pinned_training_image(
    plans: dict[str, Plan], stack: str
) -> None:
    plan = plans[stack]
    objects = argo_objects(plan)
    assert set(objects) == {"WorkflowTemplate", "CronWorkflow"}
    for doc in objects.values():
        assert_valid_argo(doc)
    template, cron = objects["WorkflowTemplate"], objects["CronWorkflow"]
    env = plan.doc["environment"]
    assert template["metadata"]["name"] == cron["spec"]["workflowSpec"]["workflowTemplateRef"]["name"]
    assert cron["spec"]["schedules"] == [
        argo.SCHEDULES[env] if env in argo.SCHEDULES else argo.SCHEDULES["staging"]
    ]
    images = {t["name"]: t["container"]["image"] for t in template["spec"]["templates"] if "container" in t}
    pinned = plan.doc["outputs"]["training_image"]
    configured = planner.load_stack(stack).training_image  # Pulumi.<stack>.yaml trainingImage
    assert pinned.endswith((f":{configured}", f"@{configured}")) or pinned == configured
    assert {name for name, image in images.items() if image == pinned} == {
        s.name for s in dag.STEPS if s.image == "training"
    }
    params = {p["name"]: p["value"] for p in template["spec"]["arguments"]["parameters"]}
    assert params["env"] == env and params["local"] == "false"
    assert params["serving-image"] == plan.doc["outputs"]["serving_image"]  # what `images` verifies
    assert params["store"].startswith(("s3://", "gs://", "abfs://"))


def test_argo_chart_is_pinned_on_the_system_pool(plans: dict[str, Plan]) -> None:
    releases = [
        r["inputs"]
        for r in plans["dev"].iter_custom()
        if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"]["chart"] == "argo-workflows"
    ]
    assert len(releases) == 1
    release = releases[0]
    assert release["version"] == infra_argo.ARGO_CHART_VERSION
    assert release["values"]["controller"]["nodeSelector"] == dict(POOL_SELECTORS["system"].node_selector)


def test_argo_dag_is_the_local_dag() -> None:
    """Same steps, dependencies and conditions as `python -m pipeline run` executes."""
    template = argo.workflow_template(
        training_image="r/training@sha256:" + "0" * 64,
        environment="dev",
        params=dag.Params(),
    )
    assert_valid_argo(template)
    tasks = {t["name"]: t for t in template["spec"]["templates"][0]["dag"]["tasks"]}
    assert list(tasks) == [s.name for s in dag.STEPS]
    for s in dag.STEPS:
        expected = " && ".join(f"{d}.Succeeded" for d in s.depends) or None
        assert tasks[s.name].get("depends") == expected
        assert ("when" in tasks[s.name]) == (s.when is not None)
    containers = {t["name"]: t["container"] for t in template["spec"]["templates"] if "container" in t}
    # The argv is the local command with {param} -> {{workflow.parameters.param}}
    assert containers["train"]["args"][:3] == ["-m", "pipeline", "step"]
    assert "{{workflow.parameters.preset}}" in containers["train"]["args"]
    retry = next(t for t in template["spec"]["templates"] if t["name"] == "train")["retryStrategy"]
    assert retry["expression"] == "lastRetry.exitCode == '75'"


def test_pipeline_pools_equal_the_infra_pools() -> None:
    for pool in ("system", "gpu"):
        expected = POOL_SELECTORS[pool]
        assert argo.POOLS[pool]["nodeSelector"] == dict(expected.node_selector)
        assert argo.POOLS[pool]["tolerations"] == [dict(t) for t in expected.tolerations]


def test_render_cli_prints_both_objects(capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.cli import main

    assert main(["render", "--training-image", "r/training:1", "--env", "staging"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["WorkflowTemplate", "CronWorkflow"]
    for d in docs:
        assert_valid_argo(d)


@pytest.mark.parametrize("stack", STACKS)
def test_pipeline_objects_wait_for_the_training_namespace(plans: dict[str, Plan], stack: str) -> None:
    """The WorkflowTemplate, CronWorkflow and executor Role/RoleBinding live in `training`: created after it."""
    resources = plans[stack].doc["resources"]
    namespace = next(
        r["urn"]
        for r in resources
        if r["type"] == "kubernetes:core/v1:Namespace" and r["inputs"]["metadata"]["name"] == argo.NAMESPACE
    )
    in_training = [
        r
        for r in resources
        if r["type"].startswith(("kubernetes:argoproj.io/", "kubernetes:rbac.authorization.k8s.io/v1:Role"))
        and (r["inputs"].get("metadata") or {}).get("namespace") == argo.NAMESPACE
    ]
    assert {r["type"].rsplit(":", 1)[1] for r in in_training} >= {"WorkflowTemplate", "CronWorkflow", "Role"}
    for r in in_training:
        assert namespace in r["dependencies"], f"{r['name']} does not wait for the {argo.NAMESPACE} namespace"


@pytest.mark.parametrize("stack", STACKS)
def test_workflow_pods_get_the_trainer_identity_and_land_on_their_pools(
    plans: dict[str, Plan], stack: str
) -> None:
    """Every step runs as the trainer: on AKS its pods need the workload-identity label or they get no token
    (no bucket, no registry), and a GPU step must tolerate every taint of the GPU pool, AKS's spot taint too."""
    plan = plans[stack]
    template = argo_objects(plan)["WorkflowTemplate"]
    outputs = plan.doc["outputs"]
    labels = outputs["trainer_pod_labels"]
    assert template["spec"].get("podMetadata", {}).get("labels", {}) == labels
    if plan.doc["cloud"] == "azure":
        assert labels == {"azure.workload.identity/use": "true"}
    selectors = outputs["pool_selectors"]
    for t in (t for t in template["spec"]["templates"] if "container" in t):
        pool = "gpu" if "nvidia.com/gpu" in t["container"]["resources"]["requests"] else "system"
        assert t["nodeSelector"] == selectors[pool]["nodeSelector"], t["name"]
        missing = [tol for tol in selectors[pool]["tolerations"] if tol not in t.get("tolerations", [])]
        assert not missing, f"{stack}: step {t['name']} does not tolerate {missing}"


def test_a_gpu_step_on_aks_tolerates_the_spot_taint() -> None:
    from infra.shape import PoolSelector

    spot = {
        "key": "kubernetes.azure.com/scalesetpriority",
        "operator": "Equal",
        "value": "spot",
        "effect": "NoSchedule",
    }
    gpu = POOL_SELECTORS["gpu"]
    pools = {**POOL_SELECTORS, "gpu": PoolSelector(gpu.node_selector, (*gpu.tolerations, spot))}
    template = argo.workflow_template(
        training_image="r/training@sha256:" + "0" * 64,
        environment="dev",
        params=dag.Params(preset="gpu"),
        pod_labels={"azure.workload.identity/use": "true"},
        pools={p: s.to_output() for p, s in pools.items()},
    )
    assert_valid_argo(template)
    train = next(t for t in template["spec"]["templates"] if t["name"] == "train")
    assert spot in train["tolerations"]
    assert template["spec"]["podMetadata"] == {"labels": {"azure.workload.identity/use": "true"}}


@pytest.mark.parametrize("stack", STACKS)
def test_each_run_reports_its_outcome_to_the_failure_alert_through_a_scraped_controller(
    plans: dict[str, Plan], stack: str
) -> None:
    """A failed retrain was silent: the training alerts watch Kubernetes Jobs, and a Workflow runs none. Each run
    now sets a gauge; the controller must serve it (metrics off by default in the chart), Prometheus must scrape
    the controller (annotations, as for Triton), and the alert must read the gauge by Argo's exported name."""
    plan = plans[stack]
    gauges = argo_objects(plan)["WorkflowTemplate"]["spec"]["metrics"]["prometheus"]
    assert {g["name"] for g in gauges} == {argo.PIPELINE_METRIC}
    assert {g["gauge"]["value"]: g["when"] for g in gauges} == {
        "1": "{{workflow.status}} == Succeeded",
        "0": "{{workflow.status}} != Succeeded",
    }
    assert all(g["labels"] == [{"key": "environment", "value": plan.doc["environment"]}] for g in gauges)
    (alert,) = [
        r for g in alert_rule_groups() for r in g["rules"] if r.get("alert") == "RetrainingPipelineFailed"
    ]
    # The alert reads the Workflow objects (kube-state-metrics): the gauge is gone after a controller restart.
    assert (
        "kube_customresource_argo_workflow_status_phase" in alert["expr"]
        and "by (environment," in alert["expr"]
    )
    assert f"argo_workflows_{argo.PIPELINE_METRIC}" not in alert["expr"]
    (release,) = [
        r["inputs"] for r in plan.iter_custom()
        if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"]["chart"] == "argo-workflows"
    ]  # fmt: skip
    controller = _ints(release["values"]["controller"])
    assert controller["metricsConfig"]["enabled"] is True
    annotations = controller["podAnnotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == controller["metricsConfig"]["port"]
    assert annotations["prometheus.io/path"] == controller["metricsConfig"]["path"]


def test_a_stuck_run_ends_before_the_next_one_is_due() -> None:
    """concurrencyPolicy Forbid skips a scheduled run while the last one still runs: a run stuck on a Pending GPU
    pod would stop retraining for good, in silence. The deadline fails it (and the gauge reports it) first."""
    for environment, schedule in argo.SCHEDULES.items():
        minute, hour, *_ = schedule.split()
        assert minute.isdigit() and hour.isdigit(), f"{environment}: runs more often than daily ({schedule})"
    template = argo.workflow_template(
        training_image="r/training@sha256:" + "0" * 64, environment="dev", params=dag.Params()
    )
    assert_valid_argo(template)
    assert template["spec"]["activeDeadlineSeconds"] == argo.RUN_DEADLINE_S < 24 * 3600
    cron = argo.cron_workflow("dev")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
