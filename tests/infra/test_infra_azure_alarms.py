"""Azure's own alarm (issue 13, item 6) as rendered in the azure-dev plan: a metric alert on the AKS
cluster's platform metric for Triton pods not Ready, mailed through a regional action group; and how the
policy pack sees it (the action group passes residency by itself, the `global` alert rule is the one
reviewed waiver). Expected values are literals."""

from __future__ import annotations

import datetime as dt

from infra_fixtures import Plan

from infra import plan as planner
from policies import waivers
from policies.plans import plan_from_dict, to_resources
from policies.rules import ALL_RULES
from policies.rules.core import Context
from policies.rules.residency import check_residency

ALERT, GROUP = "azure-native:monitor:MetricAlert", "azure-native:monitor:ActionGroup"


def test_the_aks_alert_watches_triton_pods_not_ready(plans: dict[str, Plan]) -> None:
    p = plans["azure-dev"]
    alert = p.one(ALERT)
    inputs = alert["inputs"]
    assert (inputs["ruleName"], inputs["location"], inputs["severity"]) == (
        "mlp-azure-dev-serving-not-ready",
        "global",
        2.0,
    )
    assert (inputs["evaluationFrequency"], inputs["windowSize"], inputs["autoMitigate"]) == (
        "PT5M",
        "PT15M",
        True,
    )
    (criterion,) = inputs["criteria"]["allOf"]
    assert inputs["criteria"]["odataType"] == "Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria"
    assert (criterion["metricNamespace"], criterion["metricName"]) == (
        "Microsoft.ContainerService/managedClusters",
        "kube_pod_status_ready",
    )
    assert criterion["dimensions"] == [
        {"name": "namespace", "operator": "Include", "values": ["serving"]},
        {"name": "condition", "operator": "Include", "values": ["false"]},
    ]
    assert (criterion["timeAggregation"], criterion["operator"], criterion["threshold"]) == (
        "Average",
        "GreaterThan",
        0.0,
    )
    # Scoped to the cluster (its id is known after creation) and acting through the action group.
    cluster = p.one("azure-native:containerservice:ManagedCluster")
    assert inputs["scopes"] == [planner.UNKNOWN] and cluster["urn"] in alert["dependencies"]
    group = p.one(GROUP)
    assert inputs["actions"] == [{"actionGroupId": planner.UNKNOWN}] and group["urn"] in alert["dependencies"]


def test_the_action_group_mails_the_alert_addresses_from_an_eu_region(plans: dict[str, Plan]) -> None:
    g = plans["azure-dev"].one(GROUP)["inputs"]
    assert (g["actionGroupName"], g["groupShortName"], g["enabled"]) == (
        "mlp-azure-dev-alerts",
        "azure-dev",
        True,
    )
    assert g["emailReceivers"] == [
        {"name": "email-0", "emailAddress": "ml-platform-finops@example.com", "useCommonAlertSchema": True}
    ]
    # Regional processing (spaincentral does not offer it): stored and processed in Sweden Central.
    assert g["location"] == "swedencentral"


def test_only_the_global_alert_rule_needs_the_residency_waiver(plans: dict[str, Plan]) -> None:
    resources = {r.type: r for r in to_resources(plan_from_dict(plans["azure-dev"].doc))}
    ctx = Context()
    assert list(check_residency(resources[GROUP], ctx)) == []
    (finding,) = check_residency(resources[ALERT], ctx)
    assert "'global'" in finding
    today = dt.date(2026, 12, 3)
    loaded = waivers.load(rules=[r.name for r in ALL_RULES], today=today)
    waiver = waivers.find(
        loaded, "eu-data-residency", resources[ALERT].urn, "azure-dev", today, undetermined=False
    )
    assert waiver is not None and waiver.expires <= today + waivers.MAX_VALIDITY
    # It accepts the known 'global' location, not a location the check could not see.
    assert (
        waivers.find(loaded, "eu-data-residency", resources[ALERT].urn, "azure-dev", today, undetermined=True)
        is None
    )
    # The waiver names the rule's resource only: the action group or another stack is not covered.
    assert (
        waivers.find(
            loaded, "eu-data-residency", resources[GROUP].urn, "azure-dev", today, undetermined=False
        )
        is None
    )
    assert (
        waivers.find(loaded, "eu-data-residency", resources[ALERT].urn, "prod", today, undetermined=False)
        is None
    )
