"""The cost job behind BudgetForecastOverLimit on GCP: `python -m monitoring budget --cloud gcp` pulls the
budget's Pub/Sub notifications.

The notifications, in the documented format, are published to the real Pub/Sub emulator (Google's, from
google-cloud-cli-pubsub-emulator), pulled by the CLI, pushed to a real Pushgateway that real Prometheus scrapes,
firing the alert through real Alertmanager. AWS and Azure: test_monitoring_budget.py.
"""

from __future__ import annotations

import base64
import json
import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localservers import http_ok, start_on_free_port, stop_group
from monitoring.cli import main
from monitoring.localstack import LocalAlerting
from tests.monitoring.conftest import prom_lines

EMULATOR = "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator"
PROJECT, BUDGET = "mlp-gcp-dev", "mlp-gcp-dev-monthly"


def _http(method: str, url: str, body: dict[str, Any] | None = None, timeout: float = 10) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        answer: dict[str, Any] = json.loads(resp.read() or b"{}")
        return answer


@pytest.fixture(scope="module")
def pubsub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Google's Pub/Sub emulator (Java; REST and gRPC on one port): host:port."""
    if not Path(EMULATOR).is_file() or shutil.which("java") is None:
        pytest.skip(
            f"the Pub/Sub emulator is not installed ({EMULATOR} and java: apt-get install "
            "google-cloud-cli-pubsub-emulator from Google's Cloud SDK apt source, present on the CI image)"
        )
    # It logs "java.net.BindException: Address already in use" for a lost port and keeps running.
    proc, port = start_on_free_port(lambda port: [EMULATOR, "--host=127.0.0.1", f"--port={port}"],
                                    tmp_path_factory.mktemp("pubsub") / "emulator.log", "pubsub emulator", http_ok("/"))  # fmt: skip
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop_group(proc, grace_s=15)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("prometheus-pushgateway")
    if binary is None:
        pytest.skip(
            "prometheus-pushgateway is missing: apt-get install prometheus-pushgateway (.ci/run does)"
        )
    # `--persistence.file=`: memory only; Debian's default file is shared by every gateway started on the machine.
    proc, port = start_on_free_port(lambda port: [binary, "--persistence.file=", f"--web.listen-address=127.0.0.1:{port}"],
                                    tmp_path_factory.mktemp("pushgateway") / "gateway.log", "pushgateway", http_ok("/-/ready"))  # fmt: skip
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop_group(proc, grace_s=15)


@pytest.fixture
def subscription(pubsub: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh topic and pull subscription per test (names from the test), as infra declares them."""
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub)
    monkeypatch.delenv("MONITORING_PUSHGATEWAY_URL", raising=False)
    short = request.node.name.split("[")[0].removeprefix("test_")[:40].replace("_", "-")
    topic, sub = f"projects/{PROJECT}/topics/t-{short}", f"projects/{PROJECT}/subscriptions/s-{short}"
    _http("PUT", f"http://{pubsub}/v1/{topic}")
    _http("PUT", f"http://{pubsub}/v1/{sub}", {"topic": topic, "ackDeadlineSeconds": 10})
    return sub


def publish(pubsub: str, sub: str, data: dict[str, Any] | bytes, budget_id: str = "b-0001") -> str:
    """What Cloud Billing publishes (schema 1.0, budgets-programmatic-notifications#notification_format)."""
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    topic = sub.replace("/subscriptions/s-", "/topics/t-")
    attributes = {"billingAccountId": "01D4EE-079462-DFD6EC", "budgetId": budget_id, "schemaVersion": "1.0"}
    answer = _http("POST", f"http://{pubsub}/v1/{topic}:publish",
                   {"messages": [{"data": base64.b64encode(raw).decode(), "attributes": attributes}]})  # fmt: skip
    time.sleep(0.01)  # publishTime has millisecond resolution: keep the order unambiguous
    return str(answer["messageIds"][0])


def notification(cost: float, *, forecast: float | None = None, alert: float | None = None,
                 name: str = BUDGET, month: str = "2026-12") -> dict[str, Any]:  # fmt: skip
    doc: dict[str, Any] = {
        "budgetDisplayName": name, "costAmount": cost, "costIntervalStart": f"{month}-01T08:00:00Z",
        "budgetAmount": 1800.0, "budgetAmountType": "SPECIFIED_AMOUNT", "currencyCode": "EUR",
    }  # fmt: skip
    if alert is not None:
        doc["alertThresholdExceeded"] = alert
    if forecast is not None:
        doc["forecastThresholdExceeded"] = forecast
    return doc


def gcp_argv(sub: str, *more: str) -> list[str]:
    return ["budget", "--cloud", "gcp", "--budget", BUDGET, "--stack", "gcp-dev", "--subscription", sub,
            *more]  # fmt: skip


def gateway_lines(gateway: str) -> set[str]:
    with urllib.request.urlopen(f"http://{gateway}/metrics", timeout=10) as resp:
        body = resp.read().decode()
    return {
        line.split("{")[0] + " " + line.rsplit(" ", 1)[1]
        for line in body.splitlines()
        if line.startswith("ml_budget_") and 'stack="gcp-dev"' in line
    }


@pytest.mark.integration
def test_gcp_forecast_notification_fires_the_budget_alert_and_silence_pushes_nothing(
    pubsub: str, gateway: str, subscription: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("MONITORING_PUSHGATEWAY_URL", f"http://{gateway}")
    publish(pubsub, subscription, notification(900.0, alert=0.5))
    publish(pubsub, subscription, notification(1000.0, alert=0.5, forecast=1.0))  # the newest of this budget
    publish(pubsub, subscription, notification(10.0, name="someone-elses"), budget_id="b-0002")
    out = tmp_path / "run1"
    assert main([*gcp_argv(subscription), "--out", str(out)]) == 0
    # Forecast gauge = budget x forecastThresholdExceeded: equal to the limit, so the rule (>=) fires.
    assert prom_lines(out) == {
        'ml_budget_forecast_eur{stack="gcp-dev"} 1800.0',
        'ml_budget_limit_eur{stack="gcp-dev"} 1800.0',
    }
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["acknowledged"], summary["ignored_budgets"], summary["cost"]) == (
        3,
        ["someone-elses"],
        1000.0,
    )
    pushed = {"ml_budget_forecast_eur 1800", "ml_budget_limit_eur 1800"}
    assert gateway_lines(gateway) == pushed

    # Everything was acknowledged: the next run finds nothing, pushes nothing, and says so.
    again = tmp_path / "run2"
    assert main([*gcp_argv(subscription), "--out", str(again)]) == 0
    assert "nothing pushed, the Pushgateway keeps the last values" in capsys.readouterr().err
    assert not (again / "metrics.prom").exists()
    assert gateway_lines(gateway) == pushed

    with LocalAlerting(tmp_path / "alerting", metrics_dirs=[], scrape_targets=[gateway]) as stack:
        alert = stack.wait_for("BudgetForecastOverLimit", timeout_s=90)
    assert alert is not None
    assert (alert["labels"]["stack"], alert["labels"]["severity"], alert["labels"]["owner"]) == (
        "gcp-dev", "warning", "platform",
    )  # fmt: skip
    assert (
        alert["annotations"]["summary"]
        == "Month-end spend of gcp-dev is forecast at 1800 EUR or more, over the budget"
    )

    # A new month: no forecast threshold exceeded yet; the push replaces the group, the forecast gauge goes.
    publish(pubsub, subscription, notification(40.0, month="2027-01"))
    assert main(gcp_argv(subscription)) == 0
    assert gateway_lines(gateway) == {"ml_budget_limit_eur 1800"}


@pytest.mark.integration
def test_gcp_malformed_message_is_left_unacknowledged_and_exits_2(
    pubsub: str, subscription: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = publish(pubsub, subscription, b"{not json")
    wrong_schema = dict(notification(5.0))
    wrong_schema.pop("budgetAmount")
    no_amount = publish(pubsub, subscription, wrong_schema)
    publish(pubsub, subscription, notification(700.0, alert=0.3))
    assert main([*gcp_argv(subscription), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        f"message {bad}: data is not base64 JSON" in err
        and f"message {no_amount}: budgetAmount is None" in err
    )
    # The valid notification was still exported (and acknowledged): no forecast threshold, limit only.
    assert prom_lines(tmp_path) == {'ml_budget_limit_eur{stack="gcp-dev"} 1800.0'}
    # Not acknowledged: Pub/Sub redelivers the two bad ones once their ack deadline (10 s) passes, not the good one.
    time.sleep(11)
    assert main(gcp_argv(subscription)) == 2
    err = capsys.readouterr().err
    assert f"message {bad}:" in err and f"message {no_amount}:" in err and "2 message(s)" in err


@pytest.mark.integration
def test_gcp_unknown_subscription_is_a_clear_error(
    pubsub: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub)
    assert main(gcp_argv(f"projects/{PROJECT}/subscriptions/no-such-sub")) == 2
    assert f"no Pub/Sub subscription projects/{PROJECT}/subscriptions/no-such-sub" in capsys.readouterr().err
