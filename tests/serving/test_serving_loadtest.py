"""Load-test arithmetic (the server-facing part is tested in test_serving_server.py)."""

from __future__ import annotations

import json
import math

import pytest

from serving.loadtest import percentile, run_level, summarize


def test_nearest_rank_percentiles_are_real_samples() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # unsorted on purpose
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 99)) == (50.0, 95.0, 99.0)
    assert percentile([3.0], 99) == 3.0
    assert percentile(values, 100) == 100.0
    assert math.isnan(percentile([], 50))


def test_summary_counts_errors_and_rate_from_successes() -> None:
    row = summarize(8, [0.010, 0.020, 0.030, 0.040], errors=2, wall_s=2.0)
    assert row == {
        "concurrency": 8,
        "requests": 6,
        "rps": 2.0,
        "p50_ms": 20.0,
        "p95_ms": 40.0,
        "p99_ms": 40.0,
        "errors": 2,
    }


def test_a_level_where_every_request_failed_has_no_latency_and_stays_json() -> None:
    row = summarize(8, [], errors=5, wall_s=1.0)
    assert row["requests"] == 5 and row["rps"] == 0.0
    assert (row["p50_ms"], row["p95_ms"], row["p99_ms"]) == (None, None, None)
    json.dumps({"results": [row]}, allow_nan=False)  # NaN here was a report jq and JavaScript refuse


def test_a_level_needs_exactly_one_stop_rule() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        run_level("127.0.0.1:1", ["x"], 1)
    with pytest.raises(ValueError, match="exactly one"):
        run_level("127.0.0.1:1", ["x"], 1, requests=1, duration_s=1.0)
