"""Alertmanager's inhibit rules do what monitoring/alerting.py says: each one silences a warning our rules can
raise while a page of ours for the same model fires, and nothing else.

The old rule (critical silences the warning of the same alertname and model) never applied: no alert has both
severities. The structural check reads every inhibit rule against the alerts in monitoring/rules; the end-to-end
check runs the drift and quality gauges through real Prometheus and real Alertmanager and asks Alertmanager's
API which alerts it suppressed.
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


def output_labels(rule: dict[str, Any]) -> set[str]:
    """Labels the alert carries: its rule labels and what its expression keeps (`by (...)` / `on (...)`)."""
    kept = {label.strip() for group in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", rule["expr"])
            for label in group.split(",") if label.strip()}  # fmt: skip
    return {"alertname", *rule.get("labels", {}), *kept}


@pytest.mark.parametrize(
    "inhibit", INHIBIT_RULES, ids=lambda r: " -> ".join(r["source_matchers"] + r["target_matchers"])
)
def test_every_inhibit_rule_pairs_alerts_that_exist_and_share_its_equal_labels(
    inhibit: dict[str, Any],
) -> None:
    rules = list(alerts().values())
    labelled = [(r, {"alertname": r["alert"], **r.get("labels", {})}) for r in rules]
    sources = [r for r, labels in labelled if matches(inhibit["source_matchers"], labels)]
    targets = [r for r, labels in labelled if matches(inhibit["target_matchers"], labels)]
    assert sources, f"no alert in monitoring/rules matches the source {inhibit['source_matchers']}"
    assert targets, f"no alert in monitoring/rules matches the target {inhibit['target_matchers']}"
    assert not {r["alert"] for r in sources} & {r["alert"] for r in targets}, "an alert would silence itself"
    for rule in sources + targets:
        missing = set(inhibit["equal"]) - output_labels(rule)
        assert not missing, f"{rule['alert']} carries no {missing}: Alertmanager compares them as empty"
    # A page silences a warning, never the reverse: the warning alone must not hide a page.
    assert {r["labels"]["severity"] for r in sources} == {"critical"}
    assert {r["labels"]["severity"] for r in targets} == {"warning"}


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
