"""Alert rules, their promtool unit tests, the Alertmanager routing and the dashboard's queries.

Everything is checked by Prometheus' own tools (promtool, amtool from the Debian packages), not by
re-implementing PromQL or routing here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from monitoring import metrics
from monitoring.alerting import alertmanager_config
from tests.monitoring.conftest import alerts

ROOT = Path(__file__).resolve().parents[2]
RULES = sorted((ROOT / "monitoring" / "rules").glob("*.yaml"))
RULE_TESTS = sorted((Path(__file__).parent / "rules").glob("*.test.yaml"))
DASHBOARDS = sorted((ROOT / "monitoring" / "dashboards").glob("*.json"))
# The alerts issue 13 asks for, by the name on-call will see.
REQUIRED = {
    "ServingP99LatencyOverSLO", "ServingErrorRateHigh", "ServingQueueTimeAtHPACeiling", "ModelInputDrift",
    "ModelQualityDrop", "TrainingJobFailing", "TrainingNoProgress", "TrainingGPUUtilisationLow",
    "GPUNodeIdle", "BudgetForecastOverLimit",
}  # fmt: skip
# Alerts that must never stop firing (monitoring/rules/watchdog.yaml): no severity route may match them.
ALWAYS_FIRING = {"Watchdog"}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(
            f"{name} is not installed: apt-get install prometheus prometheus-alertmanager (.ci/run does)"
        )
    return path


def test_every_required_alert_exists_with_severity_owner_and_runbook() -> None:
    found = alerts()
    assert set(found) >= REQUIRED, f"missing alerts: {REQUIRED - set(found)}"
    for name, rule in found.items():
        allowed = ("none",) if name in ALWAYS_FIRING else ("critical", "warning")
        assert rule["labels"]["severity"] in allowed, name
        assert rule["labels"]["owner"] in ("serving", "ml", "platform"), name
        assert len(rule["annotations"]["runbook"]) > 40 and rule["annotations"]["summary"], name


@pytest.mark.parametrize("path", RULES, ids=lambda p: p.name)
def test_rule_file_is_valid_for_prometheus(path: Path) -> None:
    done = subprocess.run([tool("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", RULE_TESTS, ids=lambda p: p.name)
def test_promtool_unit_tests_pass(path: Path) -> None:
    done = subprocess.run(
        [tool("promtool"), "test", "rules", path.name], cwd=path.parent, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _seconds(duration: str) -> float:
    """A Prometheus duration (`90m`, `1h30m`, `45s`) in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * units[u] for n, u in parts)


def test_every_alert_fires_stays_quiet_and_resolves_in_the_unit_tests() -> None:
    """Resolves: a case where the alert fires and, later on the same series, no longer does. An alert that
    never resolves pages on-call again every repeat_interval (TrainingJobFailing kept firing for the 7 days
    a completed Job with one retried pod stays in the cluster). ALWAYS_FIRING: the reverse, at every evaluation
    of its tests, from the first to a day or more later."""
    firing, silent, resolved = set(), set(), set()
    always: dict[str, list[float]] = {}
    for path in RULE_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            fired_at: dict[str, float] = {}
            for check in sorted(case.get("alert_rule_test", []), key=lambda c: _seconds(c["eval_time"])):
                name, at = check["alertname"], _seconds(check["eval_time"])
                if name in ALWAYS_FIRING:
                    assert check.get("exp_alerts"), f"{name} must fire at {check['eval_time']} ({path.name})"
                    always.setdefault(name, []).append(at)
                elif check.get("exp_alerts"):
                    firing.add(name)
                    fired_at.setdefault(name, at)
                else:
                    silent.add(name)
                    if name in fired_at and at > fired_at[name]:
                        resolved.add(name)
    others = set(alerts()) - ALWAYS_FIRING
    assert firing == others, f"alerts never seen firing: {others - firing}"
    assert silent == others, f"alerts never seen staying quiet: {others - silent}"
    assert resolved == others, f"alerts never seen resolving: {others - resolved}"
    assert set(always) == ALWAYS_FIRING & set(alerts())
    assert all(min(at) == 0 and max(at) >= 86400 for at in always.values()), always


def render(tmp_path: Path, **overrides) -> Path:
    args = dict(pagerduty_routing_key="pd-key", opsgenie_api_key="og-key", email_to=["oncall@example.eu"],
                email_from="alerts@example.eu", smarthost="smtp.example.eu:587")  # fmt: skip
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(alertmanager_config(**{**args, **overrides})))
    return path


@pytest.mark.parametrize(
    ("keys", "labels", "receivers"),
    [
        ({}, "severity=critical", "pagerduty,opsgenie"),
        ({}, "severity=warning", "email"),
        ({"opsgenie_api_key": None}, "severity=critical", "pagerduty"),
        ({"pagerduty_routing_key": None}, "severity=critical", "opsgenie"),
        ({"extra_webhook_url": "http://127.0.0.1:1/hook"}, "severity=warning", "webhook,email"),
        ({"extra_webhook_url": "http://127.0.0.1:1/hook"}, "severity=critical", "webhook,pagerduty,opsgenie"),
    ],
)
def test_alertmanager_routes_by_severity(tmp_path: Path, keys: dict, labels: str, receivers: str) -> None:
    config = render(tmp_path, **keys)
    amtool = tool("amtool")
    check = subprocess.run([amtool, "check-config", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    routed = subprocess.run(
        [amtool, "config", "routes", "test", f"--config.file={config}", "alertname=ModelInputDrift", labels],
        capture_output=True, text=True,
    )  # fmt: skip
    assert routed.stdout.strip() == receivers, routed.stdout + routed.stderr


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"pagerduty_routing_key": None, "opsgenie_api_key": None}, "critical alerts need a pager"),
        ({"email_to": []}, "at least one address"),
        ({"smarthost": "smtp.example.eu"}, "host:port"),
        ({"extra_webhook_url": "ftp://x"}, "http"),
    ],
)
def test_alertmanager_config_rejects_what_alertmanager_could_not_use(
    tmp_path: Path, bad: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        render(tmp_path, **bad)


_NOT_METRICS = {
    "sum", "max", "min", "avg", "count", "rate", "irate", "increase", "by", "without", "on", "ignoring",
    "and", "or", "unless", "clamp_min", "clamp_max", "time", "bool", "offset", "histogram_quantile",
    "avg_over_time", "max_over_time", "topk", "group_left", "group_right", "abs", "e",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression (the syntax itself is checked by promtool)."""
    expr = re.sub(r'"[^"]*"', "", expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    names = set(re.findall(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\b(?!\s*\()", expr))
    return {n for n in names if n not in _NOT_METRICS and not re.fullmatch(r"\d.*|e\d+", n)}


def dashboard_exprs() -> list[tuple[str, str]]:
    return [
        (f"{path.stem}: {panel['title']}", target["expr"])
        for path in DASHBOARDS
        for panel in json.loads(path.read_text())["panels"]
        for target in panel.get("targets", [])
    ]


def test_dashboard_has_the_panels_the_on_call_needs() -> None:
    titles = " | ".join(t for t, _ in dashboard_exprs()).lower()
    for word in ("throughput", "p99", "error", "queue time", "replicas", "gpu", "drift", "quality"):
        assert word in titles, f"no dashboard panel about {word}"


def test_every_dashboard_query_parses_and_names_only_known_metrics(tmp_path: Path) -> None:
    exprs = dashboard_exprs()
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:panel_{i}", "expr": expr} for i, (_, expr) in enumerate(exprs)]}]}  # fmt: skip
    path = tmp_path / "dashboard-as-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    done = subprocess.run([tool("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    for title, expr in exprs:
        unknown = metric_names(expr) - metrics.KNOWN
        assert not unknown, f"panel {title!r} reads metrics nobody exposes: {unknown}"
    for name, rule in alerts().items():
        unknown = metric_names(rule["expr"]) - metrics.KNOWN
        assert not unknown, f"alert {name} reads metrics nobody exposes: {unknown}"


def test_metric_name_extraction_sees_bare_and_selected_names() -> None:
    assert metric_names('avg by (pod) (DCGM_FI_DEV_GPU_UTIL) / rate(x_total{a="b"}[5m]) > 1e-9') == {
        "DCGM_FI_DEV_GPU_UTIL", "x_total"}  # fmt: skip


def test_queue_time_queries_watch_the_model_the_hpa_scales_on() -> None:
    # The endpoint model is where requests queue (serving/README.md); an alert or panel on another
    # model's queue stays near zero while the HPA is at its ceiling.
    from infra.k8s.autoscaling import HPA_MODEL
    from serving.repository import ENDPOINT

    assert HPA_MODEL == ENDPOINT
    texts = [p.read_text() for p in RULES + DASHBOARDS]
    queue_models = {
        m for t in texts for m in re.findall(r'nv_inference_queue_duration_us\{[^}]*model=\\?"(\w+)', t)
    }
    assert queue_models == {ENDPOINT}


def test_every_rate_window_holds_four_scrapes_of_the_cluster_prometheus() -> None:
    # rate() needs two samples in its window and is robust with four (infra/k8s/autoscaling.py): a window
    # under 4 scrape intervals reads empty or jumpy on the cluster's Prometheus.
    from infra.k8s.autoscaling import SAMPLES_PER_WINDOW, SCRAPE_INTERVAL_S

    exprs = [(f"alert {name}", rule["expr"]) for name, rule in alerts().items()] + dashboard_exprs()
    windows = [
        (where, w) for where, expr in exprs for w in re.findall(r"\[(\w+)[:\]]", re.sub(r'"[^"]*"', "", expr))
    ]
    assert windows, "no range selector found: the extraction is broken"
    short = [(where, w) for where, w in windows if _seconds(w) < SAMPLES_PER_WINDOW * SCRAPE_INTERVAL_S]
    assert not short, f"range windows under {SAMPLES_PER_WINDOW} x {SCRAPE_INTERVAL_S} s: {short}"


def test_serving_alerts_ride_over_one_missed_scrape_and_resolve_soon_after_the_fix() -> None:
    # One failed scrape of the cluster's Prometheus empties one or two of its evaluations (rules/serving_gap.test.yaml
    # plays it at 1m steps): keep_firing_for spans two intervals at least, and at most a minute, because on-call
    # waits for a serving alert's "resolved" after a rollback. ServingErrorRateHigh's rate[5m] rides over the gap.
    from infra.k8s.autoscaling import SCRAPE_INTERVAL_S

    resolved_within_s = 60

    path = ROOT / "monitoring" / "rules" / "serving.yaml"
    serving = {r["alert"]: r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]}
    kept = {
        name: _seconds(rule["keep_firing_for"]) for name, rule in serving.items() if "keep_firing_for" in rule
    }
    assert set(kept) == set(serving) - {"ServingErrorRateHigh"}
    too_short_or_long = {n: s for n, s in kept.items() if not 2 * SCRAPE_INTERVAL_S <= s <= resolved_within_s}
    assert not too_short_or_long, (
        f"keep_firing_for outside {2 * SCRAPE_INTERVAL_S}..{resolved_within_s} s: {too_short_or_long}"
    )
