"""The cost job behind BudgetForecastOverLimit: `python -m monitoring budget` reads the cloud's budget and
exports ml_budget_forecast_eur / ml_budget_limit_eur{stack}.

AWS: the real Budgets protocol (boto3 over HTTP) against moto's server, which returns a budget's
CalculatedSpend as created; the gauges then make the rule fire through real Prometheus and Alertmanager.
Azure: the Consumption Budgets REST call against a local server answering the documented body (own
code under test: the URL, the auth header, the fields read). GCP's Pub/Sub notifications:
test_monitoring_budget_gcp.py.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from monitoring import budget
from monitoring.cli import main
from monitoring.localstack import LocalAlerting
from tests.httpd import http_server
from tests.monitoring.conftest import prom_lines

ACCOUNT = "123456789012"


@pytest.fixture
def aws_env(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    # tests/conftest.py's moto server serves every AWS service, Budgets included.
    monkeypatch.setenv("AWS_ENDPOINT_URL_BUDGETS", s3_server)  # botocore's per-service endpoint setting
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("MONITORING_PUSHGATEWAY_URL", raising=False)
    return s3_server


def create(name: str, limit: str, unit: str, forecast: str | None) -> None:
    import boto3

    doc: dict[str, Any] = {
        "BudgetName": name, "BudgetType": "COST", "TimeUnit": "MONTHLY",
        "BudgetLimit": {"Amount": limit, "Unit": unit},
    }  # fmt: skip
    if forecast is not None:  # what AWS computes; moto returns it as given
        doc["CalculatedSpend"] = {
            "ActualSpend": {"Amount": "120", "Unit": unit},
            "ForecastedSpend": {"Amount": forecast, "Unit": unit},
        }
    boto3.client("budgets", region_name="us-east-1").create_budget(AccountId=ACCOUNT, Budget=doc)


@pytest.mark.integration
def test_aws_forecast_over_the_limit_fires_the_budget_alert(aws_env: str, tmp_path: Path) -> None:
    create("mlp-dev-monthly", "500.0", "EUR", "700.0")
    out = tmp_path / "budget"
    argv = [
        "budget",
        "--cloud",
        "aws",
        "--budget",
        "mlp-dev-monthly",
        "--stack",
        "dev",
        "--account-id",
        ACCOUNT,
    ]
    assert main([*argv, "--out", str(out)]) == 0
    assert prom_lines(out) == {
        'ml_budget_forecast_eur{stack="dev"} 700.0',
        'ml_budget_limit_eur{stack="dev"} 500.0',
    }
    with LocalAlerting(tmp_path / "alerting", metrics_dirs=[out]) as stack:
        alert = stack.wait_for("BudgetForecastOverLimit", timeout_s=90)
    assert alert is not None
    assert (alert["labels"]["stack"], alert["labels"]["severity"], alert["labels"]["owner"]) == (
        "dev",
        "warning",
        "platform",
    )
    assert (
        alert["annotations"]["summary"]
        == "Month-end spend of dev is forecast at 700 EUR or more, over the budget"
    )


@pytest.mark.integration
def test_aws_budget_in_another_currency_needs_an_explicit_rate(
    aws_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    create("mlp-usd-monthly", "1000", "USD", "900")
    argv = [
        "budget",
        "--cloud",
        "aws",
        "--budget",
        "mlp-usd-monthly",
        "--stack",
        "usd",
        "--account-id",
        ACCOUNT,
    ]
    assert main(argv) == 2
    assert "--eur-per-unit" in capsys.readouterr().err
    assert main([*argv, "--eur-per-unit", "0.9", "--out", str(tmp_path)]) == 0
    assert prom_lines(tmp_path) == {
        'ml_budget_forecast_eur{stack="usd"} 810.0',
        'ml_budget_limit_eur{stack="usd"} 900.0',
    }


@pytest.mark.integration
def test_a_missing_aws_budget_is_a_clear_error(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["budget", "--cloud", "aws", "--budget", "nope", "--stack", "dev", "--account-id", ACCOUNT]
    assert main(argv) == 2
    assert "no AWS budget named 'nope'" in capsys.readouterr().err


class _Consumption(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        if "/budgets/mlp-azure-dev-monthly?" not in self.path:
            self.send_response(404)
            self.end_headers()
            return
        body = {  # the shape of Microsoft.Consumption/budgets (api-version 2023-05-01)
            "id": "/subscriptions/s/resourceGroups/rg-mlp-azure-dev/providers/Microsoft.Consumption/budgets/mlp-azure-dev-monthly",
            "name": "mlp-azure-dev-monthly",
            "type": "Microsoft.Consumption/budgets",
            "properties": {
                "category": "Cost", "amount": 400.0, "timeGrain": "Monthly",
                "currentSpend": {"amount": 180.5, "unit": "EUR"},
                "forecastSpend": {"amount": 455.25, "unit": "EUR"},
            },
        }  # fmt: skip
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_azure_reads_amount_and_forecast_spend_of_the_resource_groups_budget() -> None:
    scope = "/subscriptions/0000/resourceGroups/rg-mlp-azure-dev"
    with http_server(_Consumption) as served:
        endpoint = served.url
        found = budget.read_azure(scope, "mlp-azure-dev-monthly", endpoint=endpoint, token="t0k")
        assert (found.limit, found.forecast, found.unit) == (400.0, 455.25, "EUR")
        assert _Consumption.seen[-1] == (
            f"{scope}/providers/Microsoft.Consumption/budgets/mlp-azure-dev-monthly?api-version=2023-05-01",
            "Bearer t0k",
        )
        with pytest.raises(budget.InputError, match="no Azure budget named 'other'"):
            budget.read_azure(scope, "other", endpoint=endpoint, token="t0k")
    assert budget.gauges("azure-dev", *found.in_eur(None)) == {
        "limit": ("ml_budget_limit_eur", {"stack": "azure-dev"}, 400.0),
        "forecast": ("ml_budget_forecast_eur", {"stack": "azure-dev"}, 455.25),
    }


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--cloud", "gcp"], "needs --subscription"),
        (["--cloud", "gcp", "--subscription", "budget-notes"], "is not a Pub/Sub subscription name"),
        (["--cloud", "aws", "--eur-per-unit", "0"], "--eur-per-unit 0.0"),
        (["--cloud", "azure"], "needs --scope"),
        (["--cloud", "azure", "--scope", "rg-x"], "must be a resource id"),
    ],
    ids=["gcp-no-subscription", "gcp-bad-subscription", "zero-rate", "azure-no-scope", "azure-bad-scope"],
)
def test_bad_or_unsupported_input_exits_2(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["budget", "--budget", "b", "--stack", "s", *argv]) == 2
    assert words in capsys.readouterr().err
