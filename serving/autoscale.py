"""The autoscaling signal: what the HPA scales the Triton deployment on, computed from /metrics.

    python -m serving signal --metrics-url http://127.0.0.1:8002/metrics --window 10

Two signals per model, from the difference of two scrapes (exactly what Prometheus `rate()` does):
- queue time per request (us): rate(nv_inference_queue_duration_us) / rate(nv_inference_request_success).
  Requests waiting for a free model instance is the direct symptom of too few replicas; unlike CPU it
  does not rise when a replica is merely busy but keeping up.
- average batch size: rate(nv_inference_count) / rate(nv_inference_exec_count). Near max_batch_size
  means the batcher is full: more load only adds queueing.

The HPA target (HPA_TARGET_QUEUE_US, on HPA_MODEL: the `sentiment` endpoint, whose queue is the
bottleneck) sits above the dynamic batcher's own window (the queue delay every request may spend waiting for company
even at low load) and far below the queueing seen at saturation; the measurement behind it is in
serving/README.md and tests/serving/test_serving_autoscale.py reproduces it.
"""

from __future__ import annotations

import re
import time
import urllib.request
from dataclasses import dataclass

# The target, the model and the rate window are decided once, in infra/k8s/autoscaling.py (pure, no
# Pulumi), which the infra's Prometheus, adapter rule and HPA use too.
from infra.k8s.autoscaling import HPA_MODEL, HPA_TARGET_QUEUE_US, WINDOW
from serving.errors import UnavailableError

# The same signal as PromQL (the adapter's rule is infra.k8s.autoscaling.per_pod_queue_time).
PROMQL_QUEUE_US_PER_REQUEST = (
    f'sum by (model) (rate(nv_inference_queue_duration_us{{model="{HPA_MODEL}"}}[{WINDOW}])) / '
    f'sum by (model) (rate(nv_inference_request_success{{model="{HPA_MODEL}"}}[{WINDOW}]))'
)
PROMQL_AVG_BATCH_SIZE = (
    f'sum by (model) (rate(nv_inference_count{{model="{HPA_MODEL}"}}[{WINDOW}])) / '
    f'sum by (model) (rate(nv_inference_exec_count{{model="{HPA_MODEL}"}}[{WINDOW}]))'
)
COUNTERS = (
    "nv_inference_queue_duration_us",
    "nv_inference_request_success",
    "nv_inference_count",
    "nv_inference_exec_count",
)
_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class Scrape:
    time_s: float
    counters: dict[tuple[str, str], float]
    """(metric name, model) -> value summed over the model's versions."""


@dataclass(frozen=True, slots=True)
class ModelSignal:
    model: str
    queue_us_per_request: float
    """0 when no request finished in the window (idle)."""
    avg_batch_size: float
    requests_per_s: float

    def above_target(self, target_us: float = HPA_TARGET_QUEUE_US) -> bool:
        return self.queue_us_per_request > target_us


def parse(text: str) -> dict[tuple[str, str], float]:
    """Prometheus text exposition -> {(counter, model): value}, versions summed."""
    out: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match or match["name"] not in COUNTERS:
            continue
        labels = dict(_LABEL.findall(match["labels"] or ""))
        key = (match["name"], labels.get("model", ""))
        out[key] = out.get(key, 0.0) + float(match["value"])
    return out


def scrape(metrics_url: str, timeout_s: float = 5.0) -> Scrape:
    try:
        with urllib.request.urlopen(metrics_url, timeout=timeout_s) as resp:
            text = resp.read().decode("utf-8")
    except (OSError, ValueError) as exc:  # URLError/HTTPError/timeouts are OSError; a bad URL ValueError
        raise UnavailableError(
            f"cannot scrape {metrics_url} ({exc}): is tritonserver running? Pass its metrics port "
            "with --metrics-url http://HOST:PORT/metrics"
        ) from exc
    return Scrape(time_s=time.monotonic(), counters=parse(text))


def signals(before: Scrape, after: Scrape) -> dict[str, ModelSignal]:
    """The signal of every model over the window between two scrapes."""
    elapsed = max(after.time_s - before.time_s, 1e-9)
    models = sorted({model for _, model in after.counters})

    def delta(name: str, model: str) -> float:
        # A counter that went down means the server restarted: count from zero.
        now, then = after.counters.get((name, model), 0.0), before.counters.get((name, model), 0.0)
        return now - then if now >= then else now

    result = {}
    for model in models:
        done = delta("nv_inference_request_success", model)
        executions = delta("nv_inference_exec_count", model)
        result[model] = ModelSignal(
            model=model,
            queue_us_per_request=delta("nv_inference_queue_duration_us", model) / done if done else 0.0,
            avg_batch_size=delta("nv_inference_count", model) / executions if executions else 0.0,
            requests_per_s=done / elapsed,
        )
    return result


def measure(metrics_url: str, window_s: float) -> dict[str, ModelSignal]:
    """Scrape, wait `window_s`, scrape again: the signal over that window."""
    before = scrape(metrics_url)
    time.sleep(window_s)
    return signals(before, scrape(metrics_url))
