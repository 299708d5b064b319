"""Alertmanager's inhibit rules do what monitoring/alerting.py says: each one silences an alert our rules can raise
while another of ours, told of the same model or environment and at least as severe, fires; and nothing else.

The old rule (critical silences the warning of the same alertname and model) never applied: no alert has both
severities. The structural check reads every inhibit rule against the alerts in monitoring/rules and the labels their
promtool tests see them fire with; the end-to-end checks run gauges and kube-state-metrics series through real
Prometheus and real Alertmanager and ask Alertmanager's API which alerts it suppressed.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitoring import metrics
from monitoring.alerting import INHIBIT_RULES
from monitoring.localstack import LocalAlerting
from tests.monitoring.conftest import alerts

_MATCHER = re.compile(r'^(\w+)(=|!=|=~|!~)"(.*)"$')


def matches(matchers: list[str], labels: dict[str, str]) -> bool:
    for matcher in matchers:
        found = _MATCHER.match(matcher)
        assert found, f'inhibit matcher {matcher!r} is not label<op>"value"'
        name, op, value = found.groups()
        have = labels.get(name, "")
        ok = {"=": have == value, "!=": have != value, "=~": re.fullmatch(value, have) is not None,
              "!~": re.fullmatch(value, have) is None}[op]  # fmt: skip
        if not ok:
            return False
    return True


RULE_TESTS = sorted((Path(__file__).parent / "rules").glob("*.test.yaml"))
SEVERITY_RANK = {"warning": 0, "critical": 1}


def fired_labels() -> dict[str, list[set[str]]]:
    """Alert name -> the label names of each alert its promtool tests expect to fire. promtool compares them with the
    alert's whole label set, so these are exactly what the alert carries (a label its expression aggregates away, as
    `name` under RetrainingPipelineFailed's `max by (environment, workflow)`, is not among them)."""
    found: dict[str, list[set[str]]] = {}
    for path in RULE_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                for alert in check.get("exp_alerts") or []:
                    found.setdefault(check["alertname"], []).append(
                        {"alertname", *alert.get("exp_labels", {})}
                    )
    return found


def inhibit_problems(inhibit: dict[str, Any]) -> list[str]:
    rules = list(alerts().values())
    labelled = [(r, {"alertname": r["alert"], **r.get("labels", {})}) for r in rules]
    sources = [r for r, labels in labelled if matches(inhibit["source_matchers"], labels)]
    targets = [r for r, labels in labelled if matches(inhibit["target_matchers"], labels)]
    problems = [f"no alert in monitoring/rules matches the {side} {inhibit[f'{side}_matchers']}"
                for side, found in (("source", sources), ("target", targets)) if not found]  # fmt: skip
    if {r["alert"] for r in sources} & {r["alert"] for r in targets}:
        problems.append("an alert would silence itself")
    fired = fired_labels()
    for rule in sources + targets:
        if rule["alert"] not in fired:
            problems.append(f"{rule['alert']}: no promtool test shows the labels it fires with")
        for labels in fired.get(rule["alert"], []):
            if missing := set(inhibit["equal"]) - labels:
                problems.append(
                    f"{rule['alert']} fires without {sorted(missing)}: Alertmanager compares them as empty, so any "
                    "source would silence every target"
                )
    # A page silences a warning or a page, never the reverse: a warning alone must not hide a page.
    if sources and targets:
        weakest = min(SEVERITY_RANK[r["labels"]["severity"]] for r in sources)
        if weakest < max(SEVERITY_RANK[r["labels"]["severity"]] for r in targets):
            problems.append("a source is less severe than a target it would silence")
    return problems


@pytest.mark.parametrize(
    "inhibit", INHIBIT_RULES, ids=lambda r: " -> ".join(r["source_matchers"] + r["target_matchers"])
)
def test_every_inhibit_rule_pairs_alerts_that_exist_and_share_its_equal_labels(
    inhibit: dict[str, Any],
) -> None:
    assert inhibit_problems(inhibit) == []


@pytest.mark.parametrize(
    ("inhibit", "problem"),
    [
        # Both expressions join `on (name)` inside, and neither keeps it: every environment's Failed would silence
        # every environment's Stale.
        (
            {"source_matchers": ['alertname="RetrainingPipelineFailed"'],
             "target_matchers": ['alertname="RetrainingPipelineStale"'], "equal": ["name"]},
            "fires without ['name']",
        ),
        (
            {"source_matchers": ['alertname="ModelInputDrift"'],
             "target_matchers": ['alertname="ModelQualityDrop"'], "equal": ["model"]},
            "less severe",
        ),
        (
            {"source_matchers": ['alertname="RetrainingPipelineFailing"'],
             "target_matchers": ['alertname="RetrainingPipelineStale"'], "equal": ["environment"]},
            "no alert in monitoring/rules matches the source",
        ),
    ],
)  # fmt: skip
def test_an_inhibit_rule_alertmanager_would_misapply_is_refused(
    inhibit: dict[str, Any], problem: str
) -> None:
    assert any(problem in p for p in inhibit_problems(inhibit)), inhibit_problems(inhibit)


def _am_alerts(stack: LocalAlerting, alertname: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"filter": f'alertname="{alertname}"'})
    with urllib.request.urlopen(f"{stack.alertmanager_url}/api/v2/alerts?{query}", timeout=10) as resp:
        found: list[dict[str, Any]] = json.load(resp)
        return found


@pytest.mark.integration
@pytest.mark.skipif(
    not (shutil.which("prometheus") and shutil.which("prometheus-alertmanager")),
    reason="apt-get install prometheus prometheus-alertmanager (.ci/run installs them)",
)
def test_a_quality_page_silences_the_drift_warning_of_its_model_only(tmp_path: Path) -> None:
    dirs = []
    for model, quality in (
        ("sentiment", 0.70),
        ("other", 0.91),
    ):  # reference 0.90: sentiment dropped 20 points
        for job, gauges in (
            ("drift", metrics.drift_gauges(model, 0.6, 0.3, True)),
            ("quality", metrics.quality_gauges(model, {"accuracy": quality}, {"accuracy": 0.90})),
        ):
            out = tmp_path / f"{job}-{model}"
            out.mkdir()
            metrics.export(job, {"model": model}, gauges, out_dir=out, pushgateway=None)
            dirs.append(out)
    with LocalAlerting(tmp_path / "stack", metrics_dirs=dirs, for_override="0s") as stack:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            drift = {a["labels"]["model"]: a for a in _am_alerts(stack, "ModelInputDrift")}
            pages = {a["labels"]["model"] for a in _am_alerts(stack, "ModelQualityDrop")}
            if (
                set(drift) == {"sentiment", "other"}
                and pages == {"sentiment"}
                and drift["sentiment"]["status"]["inhibitedBy"]
            ):
                break
            time.sleep(0.5)
        assert pages == {"sentiment"}, (stack.workdir / "prometheus.log").read_text()[-2000:]
        assert set(drift) == {"sentiment", "other"}
        assert drift["sentiment"]["status"]["state"] == "suppressed", drift["sentiment"]["status"]
        assert drift["sentiment"]["status"]["inhibitedBy"]
        # The other model's accuracy holds: its drift warning is delivered.
        assert drift["other"]["status"]["state"] == "active"
        assert stack.wait_for("ModelInputDrift", timeout_s=30) is not None
        delivered = {a["labels"]["model"] for a in stack.alerts("ModelInputDrift")}
    assert delivered == {"other"}


def _ksm_line(metric: str, kind: str, value: float, **labels: str) -> str:
    """One series as kube-state-metrics writes it for infra/k8s/workflow_state.py (text exposition format)."""
    labels = {"customresource_group": "argoproj.io", "customresource_kind": kind,
              "customresource_version": "v1alpha1", "namespace": "training", **labels}  # fmt: skip
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"kube_customresource_argo_{metric}{{{body}}} {value}\n"


def _run(name: str, template: str, phase: str, finished: float) -> str:
    lines = [_ksm_line("workflow_status_phase", "Workflow", float(p == phase), name=name, phase=p,
                       workflow_template=template)
             for p in ("Pending", "Running", "Succeeded", "Failed", "Error")]  # fmt: skip
    lines.append(
        _ksm_line("workflow_finished_time", "Workflow", finished, name=name, workflow_template=template)
    )
    return "".join(lines)


def _schedule(environment: str, created: float, *, suspended: bool | None) -> str:
    """The stack's WorkflowTemplate retrain-<env> and, unless `suspended` is None (deleted), its CronWorkflow."""
    name = f"retrain-{environment}"
    text = _ksm_line("workflowtemplate_created", "WorkflowTemplate", created, name=name)
    if suspended is not None:
        cron = {"name": name, "workflow_template": name}
        text += _ksm_line("cronworkflow_created", "CronWorkflow", created, **cron)
        text += _ksm_line("cronworkflow_suspended", "CronWorkflow", float(suspended), **cron)
    return text


@pytest.mark.integration
@pytest.mark.skipif(
    not (shutil.which("prometheus") and shutil.which("prometheus-alertmanager")),
    reason="apt-get install prometheus prometheus-alertmanager (.ci/run installs them)",
)
def test_a_failed_or_unscheduled_pipeline_silences_the_stale_warning_of_its_environment_only(
    tmp_path: Path,
) -> None:
    """dev: its runs fail (the last success is 83 h old, over dev's 60 h): Failed and Stale, one cause. prod: its
    CronWorkflow was deleted, a run by hand succeeded 16 days ago: Missing and Stale. staging: suspended 16 days ago,
    its last run succeeded: Stale alone, and it must still be sent."""
    now, day = time.time(), 86400.0
    out = tmp_path / "ksm"
    out.mkdir()
    (out / "metrics.prom").write_text(
        _schedule("dev", now - 30 * day, suspended=False)
        + _run("retrain-dev-1", "retrain-dev", "Succeeded", now - 300_000)
        + _run("retrain-dev-2", "retrain-dev", "Failed", now - 200_000)
        + _schedule("staging", now - 30 * day, suspended=True)
        + _run("retrain-staging-1", "retrain-staging", "Succeeded", now - 16 * day)
        + _schedule("prod", now - 30 * day, suspended=None)
        + _run("retrain-prod-manual", "retrain-prod", "Succeeded", now - 16 * day)
    )
    with LocalAlerting(tmp_path / "stack", metrics_dirs=[out], for_override="0s") as stack:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            stale = {a["labels"]["environment"]: a for a in _am_alerts(stack, "RetrainingPipelineStale")}
            failed = {a["labels"]["environment"]: a for a in _am_alerts(stack, "RetrainingPipelineFailed")}
            missing = {
                a["labels"]["environment"]: a for a in _am_alerts(stack, "RetrainingCronWorkflowMissing")
            }
            if (
                len(stale) == 3
                and failed
                and missing
                and all(stale[env]["status"]["inhibitedBy"] for env in ("dev", "prod"))
            ):
                break
            time.sleep(0.5)
        assert set(failed) == {"dev"} and set(missing) == {"prod"}, (
            stack.workdir / "prometheus.log"
        ).read_text()[-2000:]
        assert set(stale) == {"dev", "staging", "prod"}
        for env, source in (("dev", failed["dev"]), ("prod", missing["prod"])):
            assert stale[env]["status"]["state"] == "suppressed", stale[env]["status"]
            assert stale[env]["status"]["inhibitedBy"] == [source["fingerprint"]]
        # Nothing else explains staging's: its warning is sent.
        assert stale["staging"]["status"]["state"] == "active", stale["staging"]["status"]
        assert stack.wait_for("RetrainingPipelineStale", timeout_s=30) is not None
        delivered = {a["labels"]["environment"] for a in stack.alerts("RetrainingPipelineStale")}
    assert delivered == {"staging"}
