"""A team's own data, classes and model name reach the stack's retraining pipeline (`retraining:` in
Pulumi.<stack>.yaml), and what its pods could not read, or training would refuse, stops `pulumi preview`."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from infra_fixtures import Plan

from infra import config
from infra import plan as planner

TEAM = {
    "model": "ticket-router",
    "data": "s3://acme-data/tickets/2026-11.csv",
    "labels": ["Facturación", "technical", "account"],
    "textColumn": "texto",
    "labelColumn": "categoria",
}


def _raw(retraining: dict[str, Any] | None) -> dict[str, Any]:
    document = yaml.safe_load((planner.ROOT / "Pulumi.dev.yaml").read_text())
    values = config.project_keys(planner.unknown_secrets(document["config"]))
    if retraining is not None:
        values["retraining"] = copy.deepcopy(retraining)
    return values


def _workflow_parameters(plan: Plan) -> dict[str, str]:
    for r in plan.iter_custom():
        if r["inputs"].get("kind") == "WorkflowTemplate":
            return {p["name"]: p["value"] for p in r["inputs"]["spec"]["arguments"]["parameters"]}
    raise AssertionError("no WorkflowTemplate in the plan")


def _drift_args(plan: Plan) -> list[str]:
    for r in plan.of_type("kubernetes:batch/v1:CronJob"):
        if r["inputs"]["metadata"]["name"] == "drift":
            return list(
                r["inputs"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
            )
    raise AssertionError("no drift CronJob in the plan")


def test_the_stacks_retraining_block_is_what_the_nightly_workflow_trains_on() -> None:
    cfg = config.parse(_raw(TEAM), stack="dev")
    plan = Plan(planner.run(cfg, planner.stack_config("dev")))
    # The drift job's gauges name the team's model (ModelInputDrift says which model drifted).
    args = _drift_args(plan)
    assert args[args.index("--model") + 1] == "ticket-router"
    params = _workflow_parameters(plan)
    assert params["model"] == "ticket-router"
    assert params["data"] == TEAM["data"]
    assert params["labels"] == "Facturación,technical,account"
    assert (params["text-column"], params["label-column"]) == ("texto", "categoria")


def test_without_the_block_the_workflow_keeps_the_pipelines_defaults() -> None:
    from pipeline import dag

    default = config.parse(_raw(None), stack="dev").retraining
    team = dag.Params()
    assert (default.model, default.data, ",".join(default.labels)) == (team.model, team.data, team.labels)


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("data", "/home/me/tickets.csv", "pipeline's pods do not have"),
        ("data", "file:///home/me/tickets.csv", "pipeline's pods do not have"),
        ("labels", ["only-one"], "two or more"),
        ("labels", ["billing", "Billing"], "labels"),
        ("labels", ["billing, refunds", "technical"], "comma"),
        ("classes", ["a", "b"], "classes"),
    ],
)
def test_what_the_pods_or_training_would_refuse_stops_the_preview(key: str, value: Any, says: str) -> None:
    block = {**TEAM, key: value}
    with pytest.raises(config.ConfigError) as err:
        config.parse(_raw(block), stack="dev")
    assert "retraining" in str(err.value) and says in str(err.value), str(err.value)
