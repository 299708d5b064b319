"""kube-state-metrics down or not scraped is an alert of its own (monitoring/rules/exporters.yaml).

Eleven alerts read kube-state-metrics' series, ServingEndpointDown (the page for a full serving outage) among them. When
it crash-looped or lost its Service, every one of them went quiet and nothing said so: an outage of the watcher read
as a healthy cluster. KubeStateMetricsDown fires then (its promtool cases: tests/monitoring/rules/exporters.test.yaml);
here, that its runbook names exactly the alerts it blinds and that the README's alert table lists every alert as the
rules label it, so the two stay in step when an alert is added.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from pathlib import Path

import pytest

from monitoring import metrics
from monitoring.localstack import LocalAlerting
from tests.monitoring.conftest import alerts

README = Path(__file__).resolve().parents[2] / "monitoring" / "README.md"
KSM_METRICS = set(metrics.EXTERNAL["kube-state-metrics"]) | set(
    metrics.EXTERNAL["kube-state-metrics custom resources"]
)
KSM_UP = 'up{job="kubernetes-service-endpoints",app_kubernetes_io_name="kube-state-metrics"}'


def reads_kube_state_metrics(expr: str) -> bool:
    names = set(re.findall(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\b", expr))
    return bool(names & KSM_METRICS)


def test_the_runbook_names_exactly_the_alerts_kube_state_metrics_feeds() -> None:
    rules = alerts()
    blinded = {name for name, rule in rules.items() if reads_kube_state_metrics(rule["expr"])}
    not_vacuous = {"ServingEndpointDown", "ServingMetricsAbsent", "RetrainingPipelineAbsent", "MonitoringJobStale"}  # fmt: skip
    assert not_vacuous <= blinded
    runbook = rules["KubeStateMetricsDown"]["annotations"]["runbook"]
    named = {name for name in rules if re.search(rf"\b{name}\b", runbook)}
    assert named == blinded, (
        f"KubeStateMetricsDown's runbook lists the alerts it blinds: add {sorted(blinded - named)}, "
        f"drop {sorted(named - blinded)}"
    )


def test_it_watches_the_target_the_absent_pipeline_alert_trusts() -> None:
    # RetrainingPipelineAbsent stays quiet while this target is not up: the two must name the same one, or a
    # kube-state-metrics outage silences Absent with no KubeStateMetricsDown to say so.
    rules = alerts()
    assert KSM_UP in rules["RetrainingPipelineAbsent"]["expr"]
    assert KSM_UP in rules["KubeStateMetricsDown"]["expr"]
    assert rules["KubeStateMetricsDown"]["labels"]["severity"] == "critical"  # it blinds ServingEndpointDown


def test_the_readme_table_lists_every_alert_with_its_severity_and_owner() -> None:
    rows = {
        m.group(1): (m.group(2), m.group(3))
        for m in re.finditer(r"^\| (\w+) \| (critical|warning|none) \| (\w+) \|", README.read_text(), re.M)
    }
    expected = {name: (r["labels"]["severity"], r["labels"]["owner"]) for name, r in alerts().items()}
    assert rows == expected, (
        f"monitoring/README.md's alert table: missing {sorted(expected.keys() - rows.keys())}, "
        f"stale {sorted(rows.keys() - expected.keys())}, "
        f"other labels {sorted(n for n in rows.keys() & expected.keys() if rows[n] != expected[n])}"
    )


@pytest.mark.integration
@pytest.mark.skipif(
    not (shutil.which("prometheus") and shutil.which("prometheus-alertmanager")),
    reason="apt-get install prometheus prometheus-alertmanager (.ci/run installs them)",
)
def test_the_one_machine_stack_has_no_kube_state_metrics_and_stays_quiet(tmp_path: Path) -> None:
    """The demo's real Prometheus (`for:` 0s) scrapes no cluster: a plain `absent()` would page there at once."""
    job = tmp_path / "job"
    job.mkdir()
    metrics.export(metrics.DRIFT_JOB, {"model": "sentiment"}, metrics.drift_gauges("sentiment", 0.6, 0.3, True),
                   out_dir=job, pushgateway=None)  # fmt: skip
    with LocalAlerting(tmp_path / "stack", metrics_dirs=[job]) as stack:
        assert stack.wait_for("ModelInputDrift", timeout_s=60) is not None  # the rules are evaluated
        url = f"{stack.prometheus_url}/api/v1/rules?type=alert"
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310
            groups = json.load(response)["data"]["groups"]
        (rule,) = [r for g in groups for r in g["rules"] if r["name"] == "KubeStateMetricsDown"]
        assert rule["health"] == "ok", rule
        assert rule["state"] == "inactive", rule
        assert not stack.alerts("KubeStateMetricsDown")
