"""Watchdog, the alerting pipeline's heartbeat (monitoring/rules/watchdog.yaml): it always fires, and
monitoring/alerting.py routes it first and only to the heartbeat receiver (an external dead man's switch that pages
when the pings stop), or, without `heartbeat_url`, to a receiver with no integrations: never to email, the pagers or
the extra webhook. Its promtool cases are tests/monitoring/rules/watchdog.test.yaml (run by test_monitoring_rules.py);
here amtool and a real Alertmanager (behind real Prometheus for the heartbeat) check the routing.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitoring import metrics
from monitoring.alerting import HEARTBEAT_TIMING, INHIBIT_RULES, alertmanager_config
from monitoring.localstack import LocalAlerting
from tests.monitoring.conftest import alerts
from tests.monitoring.test_monitoring_inhibit import matches
from tests.monitoring.test_monitoring_rules import _seconds, render, tool

HEARTBEAT = "https://hc-ping.com/0b5c1f4e-secret-check-uuid"
HOOK = "http://127.0.0.1:1/hook"
REAL_TOOLS = pytest.mark.skipif(
    not (shutil.which("prometheus") and shutil.which("prometheus-alertmanager")),
    reason="apt-get install prometheus prometheus-alertmanager (.ci/run installs them)",
)


def test_watchdog_fires_unconditionally_and_no_inhibit_rule_can_hide_it() -> None:
    rule = alerts()["Watchdog"]
    # No `for:` (a Prometheus restart would stop the pings that long) and no series to lose.
    assert rule["expr"].strip() == "vector(1)" and "for" not in rule and "keep_firing_for" not in rule
    assert rule["labels"] == {"severity": "none", "owner": "platform"}
    assert "always firing" in rule["annotations"]["summary"].lower()
    assert "pulumi config set --secret --path monitoring.heartbeatUrl" in rule["annotations"]["runbook"]
    labels = {"alertname": "Watchdog", **rule["labels"]}
    for inhibit in INHIBIT_RULES:
        assert not matches(inhibit["target_matchers"], labels), inhibit
        assert not matches(inhibit["source_matchers"], labels), inhibit


@pytest.mark.parametrize(
    ("keys", "labels", "receivers"),
    [
        ({"heartbeat_url": HEARTBEAT}, "alertname=Watchdog severity=none", "heartbeat"),
        # The extra webhook takes every alert but this one (an always-firing alert in a chat, forever).
        ({"heartbeat_url": HEARTBEAT, "extra_webhook_url": HOOK}, "alertname=Watchdog severity=none", "heartbeat"),
        ({}, "alertname=Watchdog severity=none", "discard"),
        ({"extra_webhook_url": HOOK}, "alertname=Watchdog severity=none", "discard"),
        ({"pagerduty_routing_key": None, "opsgenie_api_key": None, "require_pager": False},
         "alertname=Watchdog severity=none", "discard"),
        # Mislabelled critical, it still only pings: the alertname is matched before any severity.
        ({"heartbeat_url": HEARTBEAT}, "alertname=Watchdog severity=critical", "heartbeat"),
        # The other alerts route as before.
        ({"heartbeat_url": HEARTBEAT, "extra_webhook_url": HOOK}, "alertname=ModelInputDrift severity=critical",
         "webhook,pagerduty,opsgenie"),
        ({"heartbeat_url": HEARTBEAT}, "alertname=ModelInputDrift severity=warning", "email"),
    ],
)  # fmt: skip
def test_watchdog_goes_to_the_heartbeat_or_nowhere(
    tmp_path: Path, keys: dict, labels: str, receivers: str
) -> None:
    config = render(tmp_path, **keys)
    amtool = tool("amtool")
    check = subprocess.run([amtool, "check-config", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    routed = subprocess.run(
        [amtool, "config", "routes", "test", f"--config.file={config}", *labels.split()],
        capture_output=True, text=True,
    )  # fmt: skip
    assert routed.stdout.strip() == receivers, routed.stdout + routed.stderr


def test_the_heartbeat_route_comes_first_pings_often_and_never_sends_resolved() -> None:
    document = alertmanager_config(
        pagerduty_routing_key="pd", opsgenie_api_key=None, email_to=["oncall@example.eu"],
        email_from="alerts@example.eu", smarthost="smtp.example.eu:587", extra_webhook_url=HOOK,
        heartbeat_url=HEARTBEAT,
    )  # fmt: skip
    first = document["route"]["routes"][0]
    assert first == {"receiver": "heartbeat", "matchers": ['alertname="Watchdog"'], "continue": False,
                     "group_wait": "10s", "group_interval": "1m", "repeat_interval": "1m"}  # fmt: skip
    (heartbeat,) = [r for r in document["receivers"] if r["name"] == "heartbeat"]
    assert heartbeat == {"name": "heartbeat", "webhook_configs": [{"url": HEARTBEAT, "send_resolved": False}]}
    # Alertmanager's docs: repeat_interval not below group_interval. It re-sends at the flush after repeat_interval,
    # one group_interval late: the pings come every 2 group_intervals, and a 5 min check period must see two.
    group, repeat = (
        _seconds(HEARTBEAT_TIMING["group_interval"]),
        _seconds(HEARTBEAT_TIMING["repeat_interval"]),
    )
    assert group <= repeat and repeat + group <= 150


@pytest.mark.parametrize(
    "url", ["ftp://hc-ping.com/secret-token", "hc-ping.com/secret-token", "https:///secret-token"]
)
def test_a_heartbeat_url_alertmanager_cannot_post_to_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(ValueError, match="heartbeat_url must be an http") as err:
        alertmanager_config(pagerduty_routing_key="pd", opsgenie_api_key=None, email_to=["oncall@example.eu"],
                            email_from="alerts@example.eu", smarthost="smtp.example.eu:587", heartbeat_url=url)  # fmt: skip
    assert "secret-token" not in str(err.value)


def _am_alert(url: str, alertname: str) -> dict[str, Any] | None:
    query = urllib.parse.urlencode({"filter": f'alertname="{alertname}"'})
    with urllib.request.urlopen(f"{url}/api/v2/alerts?{query}", timeout=10) as resp:  # noqa: S310 (loopback)
        found = json.load(resp)
    return found[0] if found else None


def _posted(received: list[dict[str, Any]], alertname: str) -> list[str]:
    """The paths of the notifications that carried `alertname`."""
    return [p["path"] for p in list(received) if isinstance(p["body"], dict)
            for a in p["body"].get("alerts", []) if a["labels"]["alertname"] == alertname]  # fmt: skip


@pytest.mark.integration
@REAL_TOOLS
def test_real_prometheus_and_alertmanager_ping_the_heartbeat_repeatedly_and_no_one_else(
    tmp_path: Path,
) -> None:
    drift = tmp_path / "drift"
    drift.mkdir()
    metrics.export(metrics.DRIFT_JOB, {"model": "sentiment"}, metrics.drift_gauges("sentiment", 0.6, 0.3, True),
                   out_dir=drift, pushgateway=None)  # fmt: skip
    with LocalAlerting(tmp_path / "stack", metrics_dirs=[drift], heartbeat=True) as stack:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pings = [p for p in list(stack.received) if p["path"] == "/heartbeat"]
            if len(pings) >= 3 and stack.alerts("ModelInputDrift"):
                break
            time.sleep(0.25)
        assert len(pings) >= 3, (stack.workdir / "alertmanager.log").read_text()[-2000:]
        watchdog = _am_alert(stack.alertmanager_url, "Watchdog")
        received = list(stack.received)
    for ping in pings:  # repeats of the one firing alert: what the dead man's switch counts
        assert ping["body"]["receiver"] == "heartbeat" and ping["body"]["status"] == "firing"
        assert [a["labels"]["alertname"] for a in ping["body"]["alerts"]] == ["Watchdog"]
    # The extra webhook is live (the drift warning reached it) and never got Watchdog; Alertmanager routed it to the
    # heartbeat alone (not email, not the pagers, which point at this receiver too).
    assert stack.alerts("ModelInputDrift") and not stack.alerts("Watchdog")
    assert set(_posted(received, "Watchdog")) == {"/heartbeat"}
    assert watchdog is not None and [r["name"] for r in watchdog["receivers"]] == ["heartbeat"]


def _receiver() -> tuple[ThreadingHTTPServer, list[dict[str, Any]]]:
    received: list[dict[str, Any]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.append({"path": self.path, "body": json.loads(body)})
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")  # the pager integrations read a JSON answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, received


@pytest.mark.integration
@REAL_TOOLS
def test_without_a_heartbeat_url_watchdog_reaches_no_receiver(tmp_path: Path) -> None:
    """The stack's config without heartbeat_url in a real Alertmanager, every receiver pointed at a local one; the
    alerts posted as Prometheus would. A warning and a page are delivered, Watchdog to nobody, flush after flush."""
    from localservers import http_ok, start_on_free_port, stop_group

    server, received = _receiver()
    # The config LocalAlerting gives Alertmanager (the pagers' URLs on the local receiver too), without Prometheus.
    hook = f"http://127.0.0.1:{server.server_address[1]}"
    config = LocalAlerting(tmp_path, metrics_dirs=[])._alertmanager_yaml(hook)
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(config))
    binary = shutil.which("prometheus-alertmanager") or "alertmanager"
    proc, port = start_on_free_port(
        lambda port: [binary, f"--config.file={tmp_path / 'alertmanager.yml'}", f"--storage.path={tmp_path / 'data'}",
                      f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        tmp_path / "alertmanager.log", "alertmanager", http_ok("/-/ready"),
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        ends = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)).isoformat()
        posted = [{"alertname": "Watchdog", "severity": "none", "owner": "platform"},
                  {"alertname": "ModelInputDrift", "severity": "warning", "owner": "ml", "model": "sentiment"},
                  {"alertname": "ServingEndpointDown", "severity": "critical", "owner": "serving"}]  # fmt: skip
        body = json.dumps([{"labels": labels, "endsAt": ends} for labels in posted]).encode()
        request = urllib.request.Request(f"{url}/api/v2/alerts", body, {"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=5).close()  # noqa: S310 (loopback)
        deadline = time.monotonic() + 30
        # The warning and the page reach every receiver they are routed to.
        delivered = {"/webhook", "/pagerduty", "/opsgenie/v2/alerts"}
        while time.monotonic() < deadline and not delivered <= {p["path"] for p in list(received)}:
            time.sleep(0.25)
        log = (tmp_path / "alertmanager.log").read_text()[-2000:]
        assert delivered <= {p["path"] for p in list(received)}, log
        time.sleep(4)  # four more flushes of the 1 s group_interval
        watchdog = _am_alert(url, "Watchdog")
    finally:
        stop_group(proc)
        server.shutdown()
        server.server_close()
    assert watchdog is not None and watchdog["status"]["state"] == "active"
    assert [r["name"] for r in watchdog["receivers"]] == ["discard"]
    assert _posted(received, "Watchdog") == []
    assert not [p["path"] for p in received if "Watchdog" in json.dumps(p["body"])]  # the pagers' own formats
