"""The autoscaling signal from the real server's /metrics: above the HPA target under load, low at idle."""

from __future__ import annotations

import threading
import time

import pytest

from serving.autoscale import HPA_MODEL, HPA_TARGET_QUEUE_US, Scrape, measure, parse, scrape, signals
from serving.client import SentimentClient
from serving.repository import ENDPOINT

SAMPLE = """# HELP nv_inference_count Number of inferences performed
# TYPE nv_inference_count counter
nv_inference_count{model="classifier",version="1"} 10
nv_inference_count{model="classifier",version="2"} 30
nv_inference_exec_count{model="classifier",version="2"} 8
nv_inference_queue_duration_us{model="classifier",version="2"} 4000
nv_inference_request_success{model="classifier",version="2"} 40
nv_cpu_utilization 0.5
"""


def test_parse_sums_versions_and_ignores_other_metrics() -> None:
    counters = parse(SAMPLE)
    assert counters[("nv_inference_count", "classifier")] == 40
    assert ("nv_cpu_utilization", "") not in counters


def test_signal_is_the_rate_ratio_and_zero_when_idle() -> None:
    before = Scrape(time_s=0.0, counters=parse(SAMPLE))
    after = Scrape(
        time_s=2.0,
        counters={
            ("nv_inference_count", "classifier"): 140,
            ("nv_inference_exec_count", "classifier"): 18,
            ("nv_inference_queue_duration_us", "classifier"): 54_000,
            ("nv_inference_request_success", "classifier"): 140,
        },
    )
    s = signals(before, after)["classifier"]
    assert s.queue_us_per_request == pytest.approx(50_000 / 100)
    assert s.avg_batch_size == pytest.approx(100 / 10)
    assert s.requests_per_s == pytest.approx(50)
    idle = signals(after, after)["classifier"]
    assert (idle.queue_us_per_request, idle.avg_batch_size, idle.requests_per_s) == (0.0, 0.0, 0.0)


def test_hpa_watches_the_model_where_requests_queue() -> None:
    # Requests wait in the endpoint's batcher (texts of any length merge there); the classifier gets
    # one merged call per endpoint instance, so its queue stays short even when the server saturates.
    assert HPA_MODEL == ENDPOINT, (
        f"infra/k8s/autoscaling.py HPA_MODEL is {HPA_MODEL!r}: set it to {ENDPOINT!r} (serving/README.md)"
    )


@pytest.mark.integration
def test_signal_rises_above_the_hpa_target_under_load_and_falls_at_idle(server) -> None:
    idle_before = measure(server.metrics_url, 1.0)
    assert not idle_before.get(ENDPOINT) or not idle_before[ENDPOINT].above_target()

    stop = threading.Event()
    # 48 clients, each sending 16 texts that all fill max_length: more work than one instance keeps up with
    # (with 24 an idle machine's server kept the tiny test model's queue just under the target).
    batch = [f"review number {i}: " + "the food was cold and the staff ignored us " * 8 for i in range(16)]

    def load() -> None:
        with SentimentClient(server.grpc_url, protocol="grpc", timeout_s=60) as client:
            while not stop.is_set():
                client.classify(batch)

    threads = [threading.Thread(target=load, daemon=True) for _ in range(48)]
    for t in threads:
        t.start()
    try:
        # The HPA reads a rate window; take the first saturated 4 s window (at most 4), since the
        # first one can include the ramp-up while clients connect.
        for _ in range(4):
            before = scrape(server.metrics_url)
            stop.wait(4.0)
            busy = signals(before, scrape(server.metrics_url))[ENDPOINT]
            if busy.above_target():
                break
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    time.sleep(2.0)  # let the last responses' statistics land before the idle window
    idle = measure(server.metrics_url, 2.0)[ENDPOINT]
    print(f"under load: {busy}\nidle: {idle}")
    assert busy.requests_per_s > 0
    assert busy.above_target(), f"queue {busy.queue_us_per_request:.0f} us <= target {HPA_TARGET_QUEUE_US}"
    assert busy.avg_batch_size > 1  # the dynamic batcher merges the waiting requests
    assert not idle.above_target() and idle.requests_per_s == 0


@pytest.mark.integration
def test_server_exports_the_latency_quantiles_the_p99_alert_reads(server) -> None:
    # monitoring/rules/serving.yaml's p99 alert and the dashboard read nv_inference_request_summary_us,
    # which tritonserver only exports with --metrics-config=summary_latencies=true.
    import urllib.request

    with SentimentClient(server.grpc_url, protocol="grpc", timeout_s=60) as client:
        client.classify(["the food was cold"])
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    assert any(
        line.startswith("nv_inference_request_summary_us{")
        and f'model="{ENDPOINT}"' in line
        and 'quantile="0.99"' in line
        for line in text.splitlines()
    ), "tritonserver exports no p99 summary: start it with --metrics-config=summary_latencies=true"
