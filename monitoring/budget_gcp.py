"""GCP's budget gauges, from the budget's own Pub/Sub notifications: `python -m monitoring budget --cloud gcp
--budget mlp-gcp-dev-monthly --stack gcp-dev --subscription projects/<p>/subscriptions/<s>`.

Cloud Billing's Budgets API returns no spend, but a budget with `allUpdatesRule.pubsubTopic` (schema "1.0",
infra/gcp/budget.py) publishes its status to that topic several times a day, whatever the thresholds
(cloud.google.com/billing/docs/how-to/budgets-programmatic-notifications, "Notification format"):
attributes `billingAccountId`, `budgetId`, `schemaVersion`; JSON data `budgetDisplayName`, `costAmount`,
`costIntervalStart`, `budgetAmount`, `budgetAmountType`, `currencyCode`, and, only once crossed,
`alertThresholdExceeded` / `forecastThresholdExceeded` (the highest threshold rule exceeded, 1.0 = 100%).

The notification carries **no forecast amount**, only that the forecast exceeded a threshold rule. So on
GCP the gauges mean:
- `ml_budget_limit_eur{stack}` = `budgetAmount`;
- `ml_budget_forecast_eur{stack}` = `budgetAmount x forecastThresholdExceeded`: the largest amount Cloud
  Billing says the month-end forecast exceeds (a lower bound of the forecast, not an estimate of it); not
  exported while no forecast threshold is exceeded. The push replaces the job's group, so a later
  notification without the field (a new month) removes it.
BudgetForecastOverLimit (`forecast >= limit`) therefore fires exactly when Cloud Billing says the forecast
exceeded the 100% forecast rule infra declares, and its summary shows the budget amount as that bound.

Draining: pull (Pub/Sub REST v1 `:pull`, through google-auth's AuthorizedSession, or plain HTTP to
PUBSUB_EMULATOR_HOST; `returnImmediately`, see `pull`) until an empty answer, keep the newest message per budget (`publishTime`), export
the one named `--budget`, then acknowledge every message read. Acknowledged only after the push: a failed
push leaves them for the next run. No message for the budget: nothing is pushed (the Pushgateway keeps the
last values; Cloud Billing republishes several times a day) and the log says so. A message that cannot
be parsed is **not** acknowledged (Pub/Sub redelivers it, and it stays on the subscription, up to its
retention, for someone to read with `gcloud pubsub subscriptions pull`); the valid ones are still exported
and acknowledged, then the command exits 2 naming it, so the failed Job shows the problem every run.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from monitoring.budget import Budget
from monitoring.environment import PUBSUB_EMULATOR_HOST
from monitoring.errors import InputError

PUBSUB_API = "https://pubsub.googleapis.com"
PUBSUB_SCOPE = "https://www.googleapis.com/auth/pubsub"
SCHEMA_VERSION = "1.0"
# Resource-name rules of Pub/Sub (cloud.google.com/pubsub/docs/pubsub-basics#resource_names): an id is
# 3-255 characters, starts with a letter, and uses letters, digits and - _ . ~ + %.
SUBSCRIPTION = re.compile(r"projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/subscriptions/[A-Za-z][\w.~+%-]{2,254}")
MAX_MESSAGES = 100


@dataclass(frozen=True, slots=True)
class Notification:
    budget_id: str
    display_name: str
    published: datetime
    cost: float
    budget: float
    currency: str
    cost_interval_start: str
    alert_threshold: float | None
    forecast_threshold: float | None

    def as_budget(self, subscription: str) -> Budget:
        forecast = None if not self.forecast_threshold else self.budget * self.forecast_threshold
        return Budget(self.budget, forecast, self.currency, f"gcp:{subscription} budget {self.budget_id}")


def _number(data: dict[str, Any], key: str, *, required: bool) -> float | None:
    value = data.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} is {value!r}, not a number")
    return float(value)


def parse(message: dict[str, Any]) -> Notification:
    """One Pub/Sub message (`receivedMessages[].message`) -> its budget notification; ValueError if not one."""
    attributes = message.get("attributes") or {}
    if attributes.get("schemaVersion") != SCHEMA_VERSION:
        raise ValueError(f"schemaVersion is {attributes.get('schemaVersion')!r}, not {SCHEMA_VERSION!r}")
    try:
        data = json.loads(base64.b64decode(message.get("data") or "", validate=True))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"data is not base64 JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("data is not a JSON object")
    for key in ("budgetDisplayName", "currencyCode", "costIntervalStart"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ValueError(f"{key} is missing")
    if not re.fullmatch(r"[A-Z]{3}", data["currencyCode"]):
        raise ValueError(f"currencyCode {data['currencyCode']!r} is not an ISO 4217 code")
    try:
        published = datetime.fromisoformat(message["publishTime"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"publishTime is {message.get('publishTime')!r}") from None
    budget = _number(data, "budgetAmount", required=True)
    assert budget is not None
    return Notification(
        budget_id=attributes.get("budgetId") or data["budgetDisplayName"],
        display_name=data["budgetDisplayName"],
        published=published,
        cost=_number(data, "costAmount", required=True) or 0.0,
        budget=budget,
        currency=data["currencyCode"],
        cost_interval_start=data["costIntervalStart"],
        alert_threshold=_number(data, "alertThresholdExceeded", required=False),
        forecast_threshold=_number(data, "forecastThresholdExceeded", required=False),
    )


class Subscription(Protocol):
    name: str

    def pull(self) -> list[dict[str, Any]]: ...
    def acknowledge(self, ack_ids: list[str]) -> None: ...


class RestSubscription:
    """Pub/Sub REST v1 on one subscription. The emulator (PUBSUB_EMULATOR_HOST) takes plain HTTP, no auth."""

    def __init__(self, name: str, *, session: Any = None) -> None:
        if not SUBSCRIPTION.fullmatch(name):
            raise InputError(
                f"--subscription {name!r} is not a Pub/Sub subscription name: "
                "projects/<project id>/subscriptions/<id> (infra exports it as the budget job's argument)"
            )
        self.name = name
        emulator = PUBSUB_EMULATOR_HOST.get()
        self.base = f"http://{emulator}" if emulator else PUBSUB_API
        if session is None:
            if emulator:
                import requests

                session = requests.Session()
            else:
                import google.auth
                from google.auth.transport.requests import AuthorizedSession

                credentials, _ = google.auth.default(scopes=[PUBSUB_SCOPE])  # Workload Identity on GKE
                session = AuthorizedSession(credentials)
        self.session = session

    def _post(self, verb: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        response = self.session.post(f"{self.base}/v1/{self.name}:{verb}", json=body, timeout=timeout)
        if response.status_code == 404:
            raise InputError(f"no Pub/Sub subscription {self.name} (check --subscription and the project)")
        response.raise_for_status()
        answer: dict[str, Any] = response.json() if response.content else {}
        return answer

    def pull(self) -> list[dict[str, Any]]:
        """One batch; [] when the subscription is drained. `returnImmediately`: without it the server holds
        an empty pull open (the emulator ~90 s), and a pull the client abandons still takes the next
        messages, hidden until their ack deadline. Google discourages the flag for throughput (it may answer
        empty while messages wait); for an hourly drain that only defers them to the next run, and Cloud
        Billing republishes the budget's status several times a day anyway."""
        answer = self._post("pull", {"maxMessages": MAX_MESSAGES, "returnImmediately": True}, timeout=60)
        received: list[dict[str, Any]] = answer.get("receivedMessages") or []
        return received

    def acknowledge(self, ack_ids: list[str]) -> None:
        # 1,000 ids a request keeps each body small; an hourly run has a handful.
        for start in range(0, len(ack_ids), 1000):
            self._post("acknowledge", {"ackIds": ack_ids[start : start + 1000]}, timeout=30)


@dataclass(slots=True)
class Drained:
    newest: dict[str, Notification] = field(default_factory=dict)  # budget id -> newest notification
    ack_ids: list[str] = field(default_factory=list)  # every message parsed (superseded ones too)
    malformed: list[str] = field(default_factory=list)  # "message <id>: reason"; not acknowledged

    def of_budget(self, display_name: str) -> Notification | None:
        mine = [n for n in self.newest.values() if n.display_name == display_name]
        return max(mine, key=lambda n: n.published) if mine else None


def drain(subscription: Subscription) -> Drained:
    out = Drained()
    seen: set[str] = set()
    while batch := subscription.pull():
        fresh = 0
        for received in batch:
            message = received.get("message") or {}
            message_id = str(message.get("messageId", "?"))
            if message_id in seen:  # redelivered within this run (a slow run outlived the ack deadline)
                continue
            seen.add(message_id)
            fresh += 1
            try:
                note = parse(message)
            except ValueError as exc:
                out.malformed.append(f"message {message_id}: {exc}")
                continue
            out.ack_ids.append(received["ackId"])
            current = out.newest.get(note.budget_id)
            if current is None or note.published > current.published:
                out.newest[note.budget_id] = note
        if not fresh:
            break
    return out
