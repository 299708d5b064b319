"""Alertmanager's configuration, as a pure function of the receivers' settings.

Routing by the `severity` label every rule in monitoring/rules/ carries:
- critical -> PagerDuty and Opsgenie (both, when both keys are given: two independent pagers),
- warning (and anything else) -> email.
An optional extra webhook receives every alert first (a chat bridge, or the tests' local receiver).
Watchdog (monitoring/rules/watchdog.yaml, always firing) is matched before all of them and goes only to the
heartbeat receiver, an external dead man's switch that pages when its pings stop (`heartbeat_url`), or to no one.
Keys come from Pulumi secrets in the stack config; this function never reads them from anywhere.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

_HOSTPORT = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")

# One notification per incident. Pairs are named: no alert has both severities, so a rule "critical silences the
# warning of the same name" never applied, and "any critical silences any warning of the model" would hide drift
# behind an unrelated serving page. A source is never less severe than its target: a warning never hides a page.
# tests/monitoring/test_monitoring_inhibit.py checks each rule against the alerts in monitoring/rules (the labels
# their promtool tests see them carry) and in a real Alertmanager.
INHIBIT_RULES: list[dict[str, Any]] = [
    # A model whose accuracy dropped pages; its input drift warning is the same story.
    {
        "source_matchers": ['alertname="ModelQualityDrop"'],
        "target_matchers": ['alertname="ModelInputDrift"'],
        "equal": ["model"],
    },
    # ...and its F1 drop (ModelClassQualityDrop) is the same drop measured otherwise.
    {
        "source_matchers": ['alertname="ModelQualityDrop"'],
        "target_matchers": ['alertname="ModelClassQualityDrop"'],
        "equal": ["model"],
    },
    # Runs that keep failing leave no success: RetrainingPipelineStale follows RetrainingPipelineFailed of the same
    # environment, one cause told twice. Stale alone is still sent (a suspended CronWorkflow, runs that never finish,
    # no run created). A Stale with a second cause (the CronWorkflow suspended after the failure) stays hidden until
    # the failure is fixed: the resubmitted run that succeeds resolves both, and Stale counts again from it.
    {
        "source_matchers": ['alertname="RetrainingPipelineFailed"'],
        "target_matchers": ['alertname="RetrainingPipelineStale"'],
        "equal": ["environment"],
    },
    # A deleted CronWorkflow whose environment still has a run by hand: Stale says "is gone", Missing says it and how
    # to restore it.
    {
        "source_matchers": ['alertname="RetrainingCronWorkflowMissing"'],
        "target_matchers": ['alertname="RetrainingPipelineStale"'],
        "equal": ["environment"],
    },
    # The whole pipeline deleted (WorkflowTemplate and CronWorkflow): Absent says so and how to restore it. Runs made
    # by hand from the template are not the CronWorkflow's and outlive it, so Stale can still fire on them: the same
    # cause. (Missing needs the template and Absent its absence: the two never fire together, no pair needed.)
    {
        "source_matchers": ['alertname="RetrainingPipelineAbsent"'],
        "target_matchers": ['alertname="RetrainingPipelineStale"'],
        "equal": ["environment"],
    },
]

# How long Alertmanager batches alerts of a new group, re-sends an unresolved one, etc.
GROUP_WAIT, GROUP_INTERVAL, REPEAT_INTERVAL = "30s", "5m", "4h"

WATCHDOG = "Watchdog"
# Watchdog's route when no heartbeat URL is given: a receiver with no integrations. An always-firing alert must
# not reach email, the pagers or the extra webhook (a notification every repeat_interval, forever, for nothing).
DISCARD = "discard"
# Watchdog's timing on the heartbeat route. Alertmanager flushes a group every group_interval and re-sends an
# unchanged one at the first flush after repeat_interval has passed since the last send, which is logged just
# after its own flush: equal values send every 2 group_intervals (measured with Alertmanager 0.25: 1s/1s every
# ~2 s, 2s/2s every 4 s). repeat_interval below group_interval gains nothing and is warned about (its docs: "should
# not be less than group_interval"). So a ping every ~2 min: a check with period 5 min and grace 5 min pages
# within ~10 min of the pipeline's death and rides over two lost pings (an Alertmanager pod rescheduled).
# group_wait: the first ping 10 s after Alertmanager (re)starts.
HEARTBEAT_TIMING: Mapping[str, str] = MappingProxyType(
    {"group_wait": "10s", "group_interval": "1m", "repeat_interval": "1m"}
)


def alertmanager_config(
    *,
    pagerduty_routing_key: str | None,
    opsgenie_api_key: str | None,
    email_to: list[str],
    email_from: str,
    smarthost: str,
    extra_webhook_url: str | None = None,
    group_wait: str = GROUP_WAIT,
    group_interval: str = GROUP_INTERVAL,
    repeat_interval: str = REPEAT_INTERVAL,
    require_pager: bool = True,
    heartbeat_url: str | None = None,
    heartbeat_timing: Mapping[str, str] = HEARTBEAT_TIMING,
) -> dict[str, Any]:
    """The alertmanager.yml document (a dict: dump it with yaml.safe_dump). `require_pager=False`: a stack whose
    policy allows email only (infra's dev and staging; the policy pack asks prod for a pager). `heartbeat_url`:
    the dead man's switch Watchdog pings (healthchecks.io, Cronitor, ...), with `heartbeat_timing`'s intervals."""
    if not email_to or not all("@" in a for a in email_to):
        raise ValueError(f"email_to={email_to!r}: give at least one address for warnings (name@domain)")
    if "@" not in email_from:
        raise ValueError(f"email_from={email_from!r}: give the sender address (name@domain)")
    if not _HOSTPORT.match(smarthost):
        raise ValueError(
            f"smarthost={smarthost!r}: use host:port of the SMTP relay (e.g. smtp.example.eu:587)"
        )
    if require_pager and not (pagerduty_routing_key or opsgenie_api_key):
        raise ValueError(
            "critical alerts need a pager: set pagerduty_routing_key and/or opsgenie_api_key "
            "(Pulumi secrets monitoring:pagerdutyRoutingKey / monitoring:opsgenieApiKey)"
        )
    if extra_webhook_url is not None and not extra_webhook_url.startswith(("http://", "https://")):
        raise ValueError(f"extra_webhook_url={extra_webhook_url!r}: must be an http(s) URL")
    if heartbeat_url is not None:
        parts = urlsplit(heartbeat_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            # Not echoed: the URL is the check's credential.
            raise ValueError(
                "heartbeat_url must be an http(s) URL with a host (the dead man's switch's ping URL)"
            )
    unknown = set(heartbeat_timing) - set(HEARTBEAT_TIMING)
    if unknown:
        raise ValueError(
            f"heartbeat_timing: unknown keys {sorted(unknown)}; allowed: {sorted(HEARTBEAT_TIMING)}"
        )

    receivers: list[dict[str, Any]] = [
        {
            "name": "email",
            "email_configs": [
                {"to": ", ".join(email_to), "from": email_from, "smarthost": smarthost, "send_resolved": True}
            ],
        }
    ]
    # Watchdog first, `continue: false`: no route after it sees it (the extra webhook included).
    watchdog: dict[str, Any] = {"matchers": [f'alertname="{WATCHDOG}"'], "continue": False}
    if heartbeat_url:
        # The service pages when the pings stop, not on "resolved" (nothing to resolve: Watchdog never does).
        receivers.append(
            {"name": "heartbeat", "webhook_configs": [{"url": heartbeat_url, "send_resolved": False}]}
        )
        watchdog = {"receiver": "heartbeat", **watchdog, **HEARTBEAT_TIMING, **heartbeat_timing}
    else:
        receivers.append({"name": DISCARD})
        watchdog = {"receiver": DISCARD, **watchdog}
    routes: list[dict[str, Any]] = []
    if extra_webhook_url:
        receivers.append(
            {"name": "webhook", "webhook_configs": [{"url": extra_webhook_url, "send_resolved": True}]}
        )
        routes.append({"receiver": "webhook", "matchers": ['alertname=~".+"'], "continue": True})
    if pagerduty_routing_key:
        receivers.append(
            {
                "name": "pagerduty",
                "pagerduty_configs": [{"routing_key": pagerduty_routing_key, "send_resolved": True}],
            }
        )
        routes.append({"receiver": "pagerduty", "matchers": ['severity="critical"'], "continue": True})
    if opsgenie_api_key:
        receivers.append(
            {
                "name": "opsgenie",
                "opsgenie_configs": [
                    {"api_key": opsgenie_api_key, "priority": "P1", "send_resolved": True,
                     "tags": "{{ .CommonLabels.owner }}"}
                ],
            }
        )  # fmt: skip
        routes.append({"receiver": "opsgenie", "matchers": ['severity="critical"'], "continue": True})
    route: dict[str, Any] = {
        "receiver": "email",
        "group_by": ["alertname", "model", "namespace"],
        "group_wait": group_wait,
        "group_interval": group_interval,
        "repeat_interval": repeat_interval,
    }
    route["routes"] = [watchdog]
    if routes:
        # Critical alerts stop at the last pager; everything else reaches the email route. (A route that
        # matched with `continue` counts as a match, so the parent's receiver alone would miss warnings.)
        routes[-1]["continue"] = False
        route["routes"] += [*routes, {"receiver": "email"}]
    return {
        "route": route,
        "inhibit_rules": copy.deepcopy(INHIBIT_RULES),
        "receivers": receivers,
    }
