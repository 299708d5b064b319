"""The budget gauges the BudgetForecastOverLimit alert reads (monitoring/rules/cost.yaml), from the cloud's
own budget: `python -m monitoring budget --cloud aws|azure|gcp ...` (a small cost job).

Reads the stack's budget (infra declares it: AWS `<stack name>-monthly`, Azure the resource group's
`<stack name>-monthly`) and exports `ml_budget_forecast_eur{stack}` (month-end forecast) and
`ml_budget_limit_eur{stack}` (the budget amount) like the other jobs: DIR/metrics.prom and, with
MONITORING_PUSHGATEWAY_URL, a push (job `monitoring-budget`, grouping `stack`).

- AWS: Budgets `DescribeBudget` returns `BudgetLimit` and `CalculatedSpend.ForecastedSpend` (AWS needs
  about five weeks of cost history before it forecasts: until then only the limit is exported and the
  alert stays quiet). The Budgets endpoint is global (us-east-1). Needs `budgets:ViewBudget`.
- Azure: Consumption Budgets `GET {scope}/providers/Microsoft.Consumption/budgets/{name}` returns
  `properties.amount` and `properties.forecastSpend` (api-version 2023-05-01). Needs
  `Microsoft.Consumption/budgets/read` (Cost Management Reader) on the resource group.
- GCP: the Billing Budgets API returns no spend; the budget publishes its status to a Pub/Sub topic, which
  `monitoring/budget_gcp.py` drains (`--cloud gcp --subscription ...`). Those notifications carry no
  forecast amount, only the forecast threshold exceeded: see that module for what the gauges mean there.

Amounts in another currency than EUR need `--eur-per-unit` (no silent conversion).
Cloud SDKs are imported lazily (boto3 for AWS; azure-identity for Azure's token).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from monitoring.errors import InputError

BUDGET_JOB = "monitoring-budget"
AZURE_API_VERSION = "2023-05-01"
AZURE_MANAGEMENT = "https://management.azure.com"


@dataclass(frozen=True, slots=True)
class Budget:
    limit: float
    forecast: float | None
    unit: str
    source: str

    def in_eur(self, eur_per_unit: float | None) -> tuple[float, float | None]:
        if self.unit == "EUR":
            rate = 1.0
        elif eur_per_unit is None:
            raise InputError(
                f"the budget {self.source} is in {self.unit}, not EUR: pass --eur-per-unit (EUR per {self.unit})"
            )
        else:
            rate = eur_per_unit
        return self.limit * rate, None if self.forecast is None else self.forecast * rate


def read_aws(budget_name: str, account_id: str | None = None, *, endpoint_url: str | None = None) -> Budget:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        if account_id is None:
            account_id = boto3.client("sts", region_name="us-east-1").get_caller_identity()["Account"]
        client = boto3.client("budgets", region_name="us-east-1", endpoint_url=endpoint_url)
        budget = client.describe_budget(AccountId=account_id, BudgetName=budget_name)["Budget"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NotFoundException":
            raise InputError(f"no AWS budget named {budget_name!r} in account {account_id}") from exc
        raise
    except BotoCoreError as exc:
        raise InputError(f"AWS Budgets could not be read: {exc}") from exc
    limit = budget["BudgetLimit"]
    forecast = (budget.get("CalculatedSpend") or {}).get("ForecastedSpend")
    if forecast is not None and forecast["Unit"] != limit["Unit"]:
        raise InputError(f"budget {budget_name}: forecast in {forecast['Unit']}, limit in {limit['Unit']}")
    return Budget(
        limit=float(limit["Amount"]),
        forecast=None if forecast is None else float(forecast["Amount"]),
        unit=limit["Unit"],
        source=f"aws:{account_id}/{budget_name}",
    )


def _azure_token() -> str:
    from azure.identity import DefaultAzureCredential  # workload identity on AKS

    return DefaultAzureCredential().get_token(f"{AZURE_MANAGEMENT}/.default").token


def read_azure(
    scope: str, budget_name: str, *, endpoint: str = AZURE_MANAGEMENT, token: str | None = None
) -> Budget:
    if not scope.startswith("/subscriptions/"):
        raise InputError(
            f"--scope {scope!r} must be a resource id such as /subscriptions/<id>/resourceGroups/<rg>"
        )
    url = (
        f"{endpoint.rstrip('/')}{scope.rstrip('/')}/providers/Microsoft.Consumption/budgets/{budget_name}"
        f"?api-version={AZURE_API_VERSION}"
    )
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token or _azure_token()}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            doc: dict[str, Any] = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise InputError(f"no Azure budget named {budget_name!r} at {scope}") from exc
        raise
    props = doc.get("properties") or {}
    if "amount" not in props:
        raise InputError(f"the Azure budget {budget_name} has no properties.amount: {str(doc)[:200]}")
    forecast = props.get("forecastSpend") or {}
    current = props.get("currentSpend") or {}
    unit = forecast.get("unit") or current.get("unit") or "EUR"
    return Budget(
        limit=float(props["amount"]),
        forecast=None if forecast.get("amount") is None else float(forecast["amount"]),
        unit=unit,
        source=f"azure:{scope}/{budget_name}",
    )


def gauges(
    stack: str, limit_eur: float, forecast_eur: float | None
) -> dict[str, tuple[str, dict[str, str], float]]:
    labels = {"stack": stack}
    out = {"limit": ("ml_budget_limit_eur", labels, limit_eur)}
    if forecast_eur is not None:
        out["forecast"] = ("ml_budget_forecast_eur", labels, forecast_eur)
    return out
