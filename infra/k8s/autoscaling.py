"""Triton autoscaling signal: mean queue time per request, per pod, in microseconds. Pure functions.

Triton's counters are cumulative (`nv_inference_queue_duration_us` sums microseconds spent queued,
`nv_inference_request_success` counts requests), so the per-pod mean over the last minute is the ratio of
their rates. `clamp_min(..., 1)` keeps an idle pod at 0 instead of NaN. The rule in Triton's k8s-onprem
chart divides by `avg` over every pod, which under-reports (triton-inference-server/server#8979).
"""

from __future__ import annotations

from typing import Any

QUEUE_METRIC = "nv_inference_queue_duration_us"
SUCCESS_METRIC = "nv_inference_request_success"
# The custom-metrics API name the Prometheus adapter serves and the HPA asks for.
HPA_METRIC = "triton_queue_time_per_request_us"
WINDOW = "1m"


def per_pod_queue_time(group_by: str = "pod", matchers: str = "") -> str:
    """The PromQL; `group_by`/`matchers` are the adapter's template slots (`<<.GroupBy>>`, `<<.LabelMatchers>>`)."""
    sel = f"{{{matchers}}}" if matchers else ""
    return (
        f"sum by ({group_by})(rate({QUEUE_METRIC}{sel}[{WINDOW}])) / "
        f"clamp_min(sum by ({group_by})(rate({SUCCESS_METRIC}{sel}[{WINDOW}])), 1)"
    )


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
