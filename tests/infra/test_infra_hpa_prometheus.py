"""The HPA's metric, proven end to end: a real Prometheus, scraping a real tritonserver at the interval the
program configures, evaluates the exact query the rendered prometheus-adapter rule holds (read from the
plan, not a copy) and reads it above the HPA's target under load and back near zero at idle.

What stands in for the cluster: Prometheus's own scrape config adds the `namespace` and `pod` labels the
prometheus chart's `kubernetes-pods` job sets from pod metadata, and the adapter's template slots are
filled as prometheus-adapter fills them for a Pods metric (`<<.GroupBy>>` = pod,
`<<.LabelMatchers>>` = namespace and pod).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from infra_fixtures import Plan

# One real tritonserver for this module, built exactly as the serving tests build theirs.
from localservers import http_ok, start_on_free_port, stop_group
from tests.serving.conftest import served_repo, server, tiny_bundle  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
NAMESPACE, POD = "serving", "triton-0"


@pytest.fixture(scope="module")
def dev_plan(plans: dict[str, Plan]) -> Plan:
    return plans["dev"]


def rendered(plan: Plan) -> dict[str, Any]:
    """What the program configured: scrape interval, the adapter's query, the HPA's target."""
    prometheus = plan.one("kubernetes:helm.sh/v3:Release", "-prometheus")["inputs"]["values"]
    adapter = plan.one("kubernetes:helm.sh/v3:Release", "-prometheus-adapter")["inputs"]["values"]
    (rule,) = adapter["rules"]["custom"]
    hpa = plan.one("kubernetes:autoscaling/v2:HorizontalPodAutoscaler")["inputs"]["spec"]
    (metric,) = hpa["metrics"]
    assert metric["pods"]["metric"]["name"] == rule["name"]["as"]
    query = (
        rule["metricsQuery"]
        .replace("<<.GroupBy>>", "pod")
        .replace("<<.LabelMatchers>>", f'namespace="{NAMESPACE}",pod=~"{POD}"')
    )
    return {
        "scrape_interval": prometheus["server"]["global"]["scrape_interval"],
        "query": query,
        "target": float(metric["pods"]["target"]["averageValue"]),
    }


def _seconds(duration: str) -> float:
    return float(duration[:-1]) * {"s": 1, "m": 60}[duration[-1]]


@pytest.fixture(scope="module")
def prometheus(server, dev_plan: Plan, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # noqa: F811
    if not Path(PROMETHEUS).exists():
        pytest.skip("the prometheus binary is missing: apt-get install prometheus (.ci/run installs it)")
    folder = tmp_path_factory.mktemp("prometheus")
    interval = rendered(dev_plan)["scrape_interval"]
    metrics = urllib.parse.urlsplit(server.metrics_url)
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {
                "job_name": "kubernetes-pods",
                "metrics_path": metrics.path or "/metrics",
                "static_configs": [
                    {"targets": [metrics.netloc], "labels": {"namespace": NAMESPACE, "pod": POD}}
                ],
            }
        ],
    }
    (folder / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    proc, port = start_on_free_port(
        lambda port: [
            PROMETHEUS,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
        ],
        folder / "prometheus.log",
        "prometheus",
        http_ok("/-/ready"),
        timeout_s=30,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_group(proc)


def instant(url: str, query: str) -> float | None:
    """The query's value for our pod now, or None while Prometheus has too few samples for rate()."""
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': query})}", timeout=10
    ) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    series = [s for s in body["data"]["result"] if s["metric"].get("pod") == POD]
    return float(series[0]["value"][1]) if series else None


def wait_for(url: str, query: str, accept: Any, timeout_s: float, what: str) -> list[float | None]:
    seen: list[float | None] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen.append(instant(url, query))
        if seen[-1] is not None and accept(seen[-1]):
            return seen
        time.sleep(2.0)
    pytest.fail(f"{what}: not reached in {timeout_s:.0f} s; values seen {seen}")


def test_the_rendered_rules_are_valid_promql(dev_plan: Plan, tmp_path: Path) -> None:
    """promtool parses the adapter's query (templated as the adapter would) and the dev KEDA query."""
    if not Path(PROMTOOL).exists():
        pytest.skip("promtool is missing: apt-get install prometheus")
    from infra.k8s import autoscaling

    queries = [rendered(dev_plan)["query"], autoscaling.keda_query("serving", "triton")]
    rules = {
        "groups": [{"name": "hpa", "rules": [{"record": f"q{i}", "expr": q} for i, q in enumerate(queries)]}]
    }
    (tmp_path / "rules.yml").write_text(json.dumps(rules))
    done = subprocess.run(
        [PROMTOOL, "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_hpa_metric_rises_above_the_target_under_load_and_falls_back_at_idle(
    server,  # noqa: F811
    prometheus: str,
    dev_plan: Plan,
) -> None:
    from serving.client import SentimentClient

    r = rendered(dev_plan)
    query, target, interval = r["query"], r["target"], _seconds(r["scrape_interval"])
    window = _seconds(query.split("[", 1)[1].split("]", 1)[0])
    near_zero = 0.05 * target

    stop = threading.Event()
    # 48 clients x 16 texts that fill max_length: more than one instance keeps up with (as in
    # tests/serving/test_serving_autoscale.py, which measured the same server directly).
    batch = [f"review number {i}: " + "the food was cold and the staff ignored us " * 8 for i in range(16)]

    def load() -> None:
        with SentimentClient(server.grpc_url, protocol="grpc", timeout_s=60) as client:
            while not stop.is_set():
                client.classify(batch)

    threads = [threading.Thread(target=load, daemon=True) for _ in range(48)]
    for t in threads:
        t.start()
    try:
        busy = wait_for(
            prometheus, query, lambda v: v > target, window + 3 * interval, "above the HPA target"
        )
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    # Back at idle once the window holds only post-load samples: about one window plus a scrape.
    idle_after = wait_for(
        prometheus, query, lambda v: v <= near_zero, window + 4 * interval, "back near zero"
    )
    print(f"target {target:.0f} us; under load {busy}; after the load {idle_after}")
    assert busy[-1] is not None and busy[-1] > target
