"""ServingMetricsAbsent (monitoring/rules/serving.yaml) against what the stacks render and what Triton really exports.

Triton's series reach Prometheus only through the prometheus chart's `kubernetes-pods` job: it scrapes the pods
annotated `prometheus.io/scrape` at their `prometheus.io/port` and `prometheus.io/path`, and labels the series with the
pod's namespace, name, node and labels (labelmap of `__meta_kubernetes_pod_label_*`, `honor_labels: true`). The latency
and error alerts and the HPA's metric read them; when that scrape stops while the Deployment serves, nothing else
fires. Here: the alert's selectors match the series of the pods every stack renders, and those pods are scrapeable as
rendered (else it would page from the first `pulumi up`); and on the rules the plan renders, the exposition of a real,
idle tritonserver keeps it quiet, while the same scrape failing fires it.
"""

from __future__ import annotations

import math
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from infra_fixtures import STACKS, Plan, k8s_objects, manifest
from promtool_rules import assert_rule_test_passes, require_promtool, rules_of

from infra.k8s.autoscaling import HPA_MODEL

# One real tritonserver for this module, built exactly as the serving tests build theirs.
from tests.serving.conftest import served_repo, server, tiny_bundle  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
ALERT = "ServingMetricsAbsent"
SELECTOR = re.compile(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
MATCHER_EQ = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
# Where the kubelet would put one replica: the pod name and IP the job's labels carry.
POD_HASH, POD_IP = "7d9f8c6b5", "10.0.5.12"


def serving_deployment(plan: Plan) -> dict[str, Any]:
    return manifest(plan.one("kubernetes:apps/v1:Deployment", "-serving-deployment"))


def scrape_labels(deployment: dict[str, Any]) -> dict[str, str]:
    """The target labels the chart's `kubernetes-pods` job gives a replica of `deployment` (the chart's values.yaml:
    pod labels with every character outside [a-zA-Z0-9_] made `_`, then namespace, pod, node)."""
    template = deployment["spec"]["template"]["metadata"]
    pod_labels = {**template["labels"], "pod-template-hash": POD_HASH}
    return {
        **{re.sub(r"[^a-zA-Z0-9_]", "_", k): v for k, v in pod_labels.items()},
        "job": "kubernetes-pods",
        "instance": f"{POD_IP}:{template['annotations']['prometheus.io/port']}",
        "namespace": deployment["metadata"]["namespace"],
        "pod": f"{deployment['metadata']['name']}-{POD_HASH}-x2k4q",
        "node": "ip-10-0-5-3",
    }


def alert_rule(plan: Plan) -> dict[str, Any]:
    (rule,) = [r for g in rules_of(plan)["groups"] for r in g["rules"] if r.get("alert") == ALERT]
    return rule


def accepts(op: str, pattern: str, value: str) -> bool:
    """PromQL's matchers: regexes are fully anchored; a missing label reads as ""."""
    hit = re.fullmatch(pattern, value) is not None if op in ("=~", "!~") else pattern == value
    return hit if op in ("=", "=~") else not hit


@pytest.mark.parametrize("stack", STACKS)
def test_the_alert_reads_the_series_of_the_pods_each_stack_renders_and_they_are_scrapeable(
    plans: dict[str, Plan], stack: str
) -> None:
    plan = plans[stack]
    deployment = serving_deployment(plan)
    template = deployment["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    (container,) = template["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]
    assert annotations["prometheus.io/path"] == "/metrics"
    # The serving image's tritonserver listens there (containers/serving/Dockerfile CMD).
    cmd = (ROOT / "containers" / "serving" / "Dockerfile").read_text()
    assert re.findall(r"--metrics-port=(\d+)", cmd) == [str(ports["metrics"])]
    # Prometheus may reach that port through the namespace's default-deny.
    (prometheus,) = [
        r["inputs"] for r in plan.iter_custom()
        if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"]["chart"] == "prometheus"
    ]  # fmt: skip
    pod_labels = template["metadata"]["labels"]
    admitted = [
        rule
        for o in k8s_objects(plan)
        if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == deployment["metadata"]["namespace"]
        and o["spec"]["podSelector"].get("matchLabels", {}).items() <= pod_labels.items()
        for rule in o["spec"].get("ingress", [])
        if any(p["port"] == ports["metrics"] for p in rule.get("ports", []))
        and any(
            f.get("namespaceSelector", {}).get("matchLabels") == {"kubernetes.io/metadata.name": prometheus["namespace"]}
            for f in rule.get("from", [])
        )
    ]  # fmt: skip
    assert admitted, "no NetworkPolicy admits Prometheus to Triton's metrics port"

    rule = alert_rule(plan)
    target = scrape_labels(deployment)
    series = {"up": target, "nv_inference_queue_duration_us": {**target, "model": HPA_MODEL, "version": "1"}}
    # Its kube_deployment_* selectors: tests/infra/test_infra_alert_selectors.py, as for every alert.
    seen = set()
    for text in (rule["expr"], rule["annotations"]["summary"]):
        for metric, body in SELECTOR.findall(text):
            if metric in series:
                seen.add(metric)
                for label, op, value in MATCHER.findall(body):
                    assert accepts(op, value, series[metric].get(label, "")), (metric, label, op, value)
    assert seen == set(series)


# A sample line of the text exposition format: name, optional {labels}, value (Triton writes no timestamps).
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")


def exposition_series(text: str, target: dict[str, str], values: str) -> list[dict[str, str]]:
    """Triton's nv_* samples as the job stores them: names as exposed (a parser such as prometheus_client's would add
    `_total` to counters; Prometheus does not), Triton's labels over the target's (`honor_labels: true`). The latency
    quantiles of a model that has served nothing are NaN: left out (promtool's series notation has none)."""
    out = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if not match or not match[1].startswith("nv_") or not math.isfinite(value := float(match[3])):
            continue
        labels = {**target, **dict(MATCHER_EQ.findall(match[2] or ""))}
        body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        out.append({"series": f"{match[1]}{{{body}}}", "values": values.format(f"{value:g}")})
    return out


@pytest.mark.integration
@pytest.mark.slow
def test_an_idle_tritonserver_keeps_it_quiet_and_a_scrape_that_fails_fires_it(
    plans: dict[str, Plan],
    server,  # noqa: F811
    tmp_path: Path,
) -> None:
    """prod, two replicas available. Quiet: every minute the pod's exposition as a fresh tritonserver serves it
    (no request yet). Firing: the same until 10m, then its scrape times out (a NetworkPolicy: `up` 0)."""
    require_promtool()
    plan = plans["prod"]
    deployment = serving_deployment(plan)
    target = scrape_labels(deployment)
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:  # noqa: S310
        text = response.read().decode()
    ns, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
    available = {"series": f'kube_deployment_status_replicas_available{{deployment="{name}",namespace="{ns}"}}',
                 "values": "2x40"}  # fmt: skip
    up = "up{" + ",".join(f'{k}="{v}"' for k, v in sorted(target.items())) + "}"
    scraped = exposition_series(text, target, "{0}x40")
    assert any(f'model="{HPA_MODEL}"' in s["series"] for s in scraped), (
        "Triton exported nothing for the model"
    )
    quiet = [available, {"series": up, "values": "1x40"}, *scraped]
    lost = [available, {"series": up, "values": "1x9 0x30"}, *exposition_series(text, target, "{0}x9 stale")]
    rule = alert_rule(plan)
    firing = {
        "exp_labels": {**rule["labels"], "namespace": ns, "deployment": name},
        "exp_annotations": {
            "summary": f"{ns}/{name} serves with 2 available replica(s) and Prometheus reads none of their metrics, "
            "so the latency and error alerts are blind and the HPA cannot scale: the scrape of "
            f"{target['instance']} fails",
            "runbook": rule["annotations"]["runbook"],
        },
    }
    assert_rule_test_passes(
        rules_of(plan),
        [
            (quiet, [{"eval_time": "40m", "alertname": ALERT, "exp_alerts": []}]),
            (
                lost,
                [
                    {"eval_time": "19m", "alertname": ALERT, "exp_alerts": []},
                    {"eval_time": "20m", "alertname": ALERT, "exp_alerts": [firing]},
                ],
            ),
        ],
        tmp_path,
    )
