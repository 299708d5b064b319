"""A scrape gap does not page twice: real Prometheus evaluating monitoring/rules (keep_firing_for as written, `for:`
shortened by LocalAlerting) and real Alertmanager. The evaluate job's quality gauges vanish from one scrape (the
Pushgateway restarting or failing its scrape) while the model is still bad: the alert must stay the one that fired
first. Before keep_firing_for, Prometheus resolved ModelQualityDrop at the gap and fired a new one (a new activeAt,
a new startsAt in Alertmanager: a second page) a second later. The resolution after a real fix, 10 minutes later,
is checked by promtool in rules/scrape_gap.test.yaml (simulated time)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

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
ALERT = "ModelQualityDrop"
T = TypeVar("T")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (loopback)
        return json.load(response)


def _until(what: str, probe: Callable[[], T | None], timeout_s: float = 60) -> T:
    """The first non-None answer of `probe`; a deadline only so that a broken stack fails instead of hanging."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found is not None:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s")


def _seconds(stamp: str) -> float:
    """An RFC 3339 time of Prometheus (nanoseconds) or Alertmanager (milliseconds), cut to the millisecond."""
    head, _, fraction = stamp.rstrip("Z").partition(".")
    whole = int(dt.datetime.fromisoformat(head).replace(tzinfo=dt.UTC).timestamp())
    return (whole * 1000 + int((fraction + "000")[:3])) / 1000


def _firing(stack: LocalAlerting) -> tuple[dict[str, Any] | None, float]:
    """Prometheus's firing ALERT (or None) and when its rule group was last evaluated (Unix seconds)."""
    groups = _get(f"{stack.prometheus_url}/api/v1/rules?type=alert")["data"]["groups"]
    (group,) = [g for g in groups if any(r["name"] == ALERT for r in g["rules"])]
    (rule,) = [r for r in group["rules"] if r["name"] == ALERT]
    firing = [a for a in rule["alerts"] if a["state"] == "firing"]
    return (firing[0] if firing else None), _seconds(group["lastEvaluation"])


def _gauges_scraped(stack: LocalAlerting) -> bool:
    query = urllib.parse.urlencode({"query": "ml_quality"})
    return bool(_get(f"{stack.prometheus_url}/api/v1/query?{query}")["data"]["result"])


def _evaluated_after(stack: LocalAlerting, moment: float) -> dict[str, Any] | None:
    """The firing alert (or None) as an evaluation that started after `moment` left it."""

    def evaluated() -> tuple[dict[str, Any] | None] | None:
        alert, at = _firing(stack)
        return (alert,) if at > moment else None

    return _until("an evaluation", evaluated)[0]


def _alertmanager_starts_at(stack: LocalAlerting) -> float | None:
    query = urllib.parse.urlencode({"filter": f'alertname="{ALERT}"'})
    found = _get(f"{stack.alertmanager_url}/api/v2/alerts?{query}")
    return _seconds(found[0]["startsAt"]) if found else None


def test_a_one_scrape_gap_keeps_the_alert_that_fired_and_pages_once(tmp_path: Path) -> None:
    job = tmp_path / "evaluate"
    job.mkdir()
    gauges = metrics.quality_gauges("sentiment", {"accuracy": 0.70}, {"accuracy": 0.90})  # 20 points down
    metrics.export(metrics.QUALITY_JOB, {"model": "sentiment"}, gauges, out_dir=job, pushgateway=None)
    served, away = job / "metrics.prom", job / "metrics.prom.away"
    with LocalAlerting(tmp_path / "stack", metrics_dirs=[job]) as stack:
        first = _until("the alert fires", lambda: _firing(stack)[0])
        paged = _until("Alertmanager has it", lambda: _alertmanager_starts_at(stack))
        assert paged == _seconds(first["activeAt"])

        served.rename(away)  # the exporter now serves nothing: the gauges go stale, as after a failed scrape
        _until("the gauges vanish", lambda: True if not _gauges_scraped(stack) else None)
        during = _evaluated_after(stack, time.time())
        away.rename(served)
        _until("the gauges are back", lambda: True if _gauges_scraped(stack) else None)
        after = _evaluated_after(stack, time.time())

        assert during is not None, "the alert resolved during the gap: Alertmanager was told it was over"
        assert after is not None and after["activeAt"] == first["activeAt"], (first, after)
        # Alertmanager holds the alert Prometheus has now: still the first one, the page it already sent.
        now = _seconds(after["activeAt"])
        held = _until("Alertmanager in step", lambda: now if _alertmanager_starts_at(stack) == now else None)
        delivered = stack.alerts(ALERT)
    assert held == paged
    assert {a["status"] for a in delivered} <= {"firing"}, delivered
    assert {_seconds(a["startsAt"]) for a in delivered} <= {paged}, delivered
