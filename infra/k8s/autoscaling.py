"""Triton's autoscaling signal, decided in one place: what is measured, how often, over which window, and
the target. Pure (no Pulumi): `serving/autoscale.py` (the local signal and its measurement) and the infra
(Prometheus scrape interval, prometheus-adapter rule, HPA target, KEDA query) both import it.

The signal is the mean queue time per request of the `sentiment` endpoint model, per pod, in microseconds:
Triton's counters are cumulative (`nv_inference_queue_duration_us` sums the microseconds requests spent
queued, `nv_inference_request_success` and `_failure` count the requests that finished), so the mean over
a window is the ratio of their rates. Only the endpoint counts: requests wait in its batcher (it takes texts
of any length, so the queue forms there), and the classifier it calls gets one merged call per endpoint
execution, so the classifier's own queue stays near zero even when the server saturates (serving/README.md,
"Autoscaling signal": 3.3 ms measured there under a saturating load). Pooling models dilutes the signal.

Consistency: Prometheus's `rate()` needs at least two samples in its window and is robust with four or
more, so the window is derived from the scrape interval (WINDOW_S = SAMPLES_PER_WINDOW x interval) rather
than chosen separately. The target comes from serving's measurement (serving/README.md, "Autoscaling
signal"): queue time is the batching window (0-10 ms) while one replica keeps up and jumps by two orders
of magnitude once it saturates; 20 ms sits above the first and below every saturated value.
"""

from __future__ import annotations

from typing import Any

QUEUE_METRIC = "nv_inference_queue_duration_us"
SUCCESS_METRIC = "nv_inference_request_success"
FAILURE_METRIC = "nv_inference_request_failure"
# The model whose queue is the bottleneck (the `sentiment` endpoint, serving.repository.ENDPOINT).
HPA_MODEL = "sentiment"
# The custom-metrics API name the Prometheus adapter serves and the HPA asks for.
HPA_METRIC = "triton_queue_time_per_request_us"
# Queue time per request (microseconds) above which the HPA adds replicas.
HPA_TARGET_QUEUE_US = 20_000

SCRAPE_INTERVAL_S = 15
SAMPLES_PER_WINDOW = 4
WINDOW_S = SCRAPE_INTERVAL_S * SAMPLES_PER_WINDOW
# Below any request rate a window can show (one request per window is 1/WINDOW_S per second), so the
# division is exact under load and an idle pod reads 0 instead of NaN.
MIN_RATE = 1e-3
assert MIN_RATE < 1 / WINDOW_S


def duration(seconds: int) -> str:
    """A Prometheus duration: `1m` for 60, `15s` for 15."""
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


SCRAPE_INTERVAL = duration(SCRAPE_INTERVAL_S)
WINDOW = duration(WINDOW_S)


def per_pod_queue_time(group_by: str = "pod", matchers: str = "") -> str:
    """The PromQL; `group_by`/`matchers` are the adapter's template slots (`<<.GroupBy>>`, `<<.LabelMatchers>>`).

    One selector for both request counters (`__name__=~`), so a pod that has never failed a request (no
    failure series yet) still gets a denominator.
    """
    extra = f",{matchers}" if matchers else ""
    model = f'model="{HPA_MODEL}"'
    queued = f"rate({QUEUE_METRIC}{{{model}{extra}}}[{WINDOW}])"
    finished = f'rate({{__name__=~"{SUCCESS_METRIC}|{FAILURE_METRIC}",{model}{extra}}}[{WINDOW}])'
    return f"sum by ({group_by})({queued}) / clamp_min(sum by ({group_by})({finished}), {MIN_RATE:g})"


def adapter_rule() -> dict[str, Any]:
    """The prometheus-adapter custom rule that serves HPA_METRIC for every pod exporting Triton metrics."""
    return {
        "seriesQuery": f'{QUEUE_METRIC}{{namespace!="",pod!=""}}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"matches": f"^{QUEUE_METRIC}$", "as": HPA_METRIC},
        "metricsQuery": per_pod_queue_time("<<.GroupBy>>", "<<.LabelMatchers>>"),
    }


def keda_query(namespace: str, app: str) -> str:
    """KEDA wants one number per query: the mean over the deployment's pods of the per-pod mean."""
    matchers = f'namespace="{namespace}",pod=~"{app}-.*"'
    return f"avg({per_pod_queue_time('pod', matchers)})"
