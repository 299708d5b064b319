"""The drift alert end to end: real series -> real Prometheus rule -> real Alertmanager -> webhook.

The drift job's own output (metrics.prom written by monitoring.metrics) is what Prometheus scrapes;
the rule is monitoring/rules/model.yaml with `for:` shortened; Alertmanager runs the configuration
monitoring.alerting renders, its receivers pointed at a local HTTP receiver.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from monitoring import metrics
from monitoring.localstack import LocalAlerting

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (shutil.which("prometheus") and shutil.which("prometheus-alertmanager")),
        reason="apt-get install prometheus prometheus-alertmanager (.ci/run installs them)",
    ),
]


def test_drift_over_threshold_reaches_the_on_call_webhook_with_its_labels(tmp_path: Path) -> None:
    drifted, calm = tmp_path / "job-sentiment", tmp_path / "job-other"
    for path, model, score in ((drifted, "sentiment", 0.5), (calm, "other", 0.1)):
        path.mkdir()
        metrics.export(metrics.DRIFT_JOB, {"model": model}, metrics.drift_gauges(model, score, 0.3, score >= 0.3),
                       out_dir=path, pushgateway=None)  # fmt: skip
    with LocalAlerting(tmp_path / "stack", metrics_dirs=[drifted, calm]) as stack:
        alert = stack.wait_for("ModelInputDrift", timeout_s=60)
        assert alert is not None, (stack.workdir / "prometheus.log").read_text()[-2000:]
        others = stack.alerts("ModelInputDrift")
    assert alert["status"] == "firing"
    assert alert["labels"] == {"alertname": "ModelInputDrift", "model": "sentiment", "severity": "warning",
                               "owner": "ml"}  # fmt: skip
    assert "Drift score 0.50 for sentiment" in alert["annotations"]["summary"]
    assert "drift.html" in alert["annotations"]["runbook"]
    assert all(a["labels"]["model"] == "sentiment" for a in others), "the calm model must not alert"
    # A warning goes to the webhook and email, never to the pagers.
    assert not [p for p in stack.received if p["path"] != "/webhook"]


def test_a_relative_workdir_still_loads_every_rule_and_fires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # make demo passes runs/demo/monitoring/alerting: Prometheus resolves rule_files against its config's
    # folder, so relative rule paths loaded nothing, silently, and the drift alert never fired.
    monkeypatch.chdir(tmp_path)
    job = Path("job")
    job.mkdir()
    metrics.export(metrics.DRIFT_JOB, {"model": "sentiment"}, metrics.drift_gauges("sentiment", 0.6, 0.3, True),
                   out_dir=job, pushgateway=None)  # fmt: skip
    with LocalAlerting(Path("runs") / "alerting", metrics_dirs=[job]) as stack:
        assert stack.wait_for("ModelInputDrift", timeout_s=60) is not None
