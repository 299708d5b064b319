"""Closed-loop load test: N concurrent clients, each sending one text per request, back to back.

    python -m serving loadtest --url 127.0.0.1:8001 --protocol grpc --concurrency 1,8,32 --out reports/loadtest.json

Output (the contract other parts read): {"url", "model", "results": [{"concurrency", "requests", "rps",
"p50_ms", "p95_ms", "p99_ms", "errors"}]}. Latency is measured per request around the client call,
so it includes the client's own serialization, as a caller would see it. Each request is bounded by
`timeout_s` (CLI `--timeout`, default 30 s); one that gets no answer in time counts in `errors`, and stderr
says how many of a level's errors were timeouts.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from serving.client import Protocol, SentimentClient
from serving.errors import RequestTimeoutError

DEFAULT_CONCURRENCY = (1, 8, 32)
READY_TIMEOUT_S = 10.0
# Per request. Generous on purpose: a load test measures latency, and a request cut short is lost as a sample.
DEFAULT_TIMEOUT_S = 30.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: p99 of 100 samples is the 99th slowest, a real request)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def summarize(concurrency: int, latencies_s: Sequence[float], errors: int, wall_s: float) -> dict[str, Any]:
    """One report row. A level where every request failed has no latency: null, not NaN (a bare NaN makes the
    report invalid JSON for jq, JavaScript and the promotion record that quotes it; its gates fail on null)."""
    ms = [x * 1000 for x in latencies_s]
    return {
        "concurrency": concurrency,
        "requests": len(ms) + errors,
        "rps": round(len(ms) / wall_s, 2) if wall_s > 0 else 0.0,
        **{f"p{q}_ms": round(percentile(ms, q), 2) if ms else None for q in (50, 95, 99)},
        "errors": errors,
    }


def measure_level(
    url: str,
    texts: Sequence[str],
    concurrency: int,
    *,
    requests: int | None = None,
    duration_s: float | None = None,
    model: str = "sentiment",
    protocol: Protocol = "grpc",
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[str, Any]:
    """Raw measurements of one level: {"latencies": [s, ...], "errors": int, "wall_s": float, "timeouts": int,
    "first_error": str | None}. `timeouts` (requests without an answer within `timeout_s`) are part of `errors`.

    Stops after `requests` requests in total or after `duration_s` seconds.
    """
    if (requests is None) == (duration_s is None):
        raise ValueError("pass exactly one of requests= or duration_s=")
    if concurrency < 1 or not texts:
        raise ValueError("concurrency must be >= 1 and texts non-empty")
    counter = itertools.count()
    lock = threading.Lock()
    latencies: list[float] = []
    errors = [0, 0]  # all failures, of which timeouts
    first_error: list[str] = []
    clients = [
        SentimentClient(url, protocol=protocol, model=model, timeout_s=timeout_s, retries=0)
        for _ in range(concurrency)
    ]
    start = time.perf_counter()
    deadline = start + duration_s if duration_s is not None else None

    def worker(client: SentimentClient) -> None:
        mine: list[float] = []
        failed = timed_out = 0
        first = ""
        while True:
            i = next(counter)
            if requests is not None and i >= requests:
                break
            if deadline is not None and time.perf_counter() >= deadline:
                break
            t0 = time.perf_counter()
            try:
                client.infer_raw([texts[i % len(texts)]])
                mine.append(time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001 - counted, the run goes on
                failed += 1
                timed_out += isinstance(exc, RequestTimeoutError)
                first = first or f"{type(exc).__name__}: {exc}"
        with lock:
            latencies.extend(mine)
            errors[0] += failed
            errors[1] += timed_out
            if first and not first_error:
                first_error.append(first)

    threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    for c in clients:
        c.close()
    return {
        "latencies": latencies,
        "errors": errors[0],
        "wall_s": wall,
        "timeouts": errors[1],
        "first_error": first_error[0] if first_error else None,
    }


def run_level(url: str, texts: Sequence[str], concurrency: int, **kwargs: Any) -> dict[str, Any]:
    """One concurrency level summarized as a row of the report (see measure_level for the arguments).

    A level with errors says on stderr how many were timeouts and what the first one was: the row only
    counts them, and the fix differs (a raised --timeout for a slow server, the input or server otherwise)."""
    raw = measure_level(url, texts, concurrency, **kwargs)
    if raw["errors"]:
        timeout_s = kwargs.get("timeout_s", DEFAULT_TIMEOUT_S)
        print(
            f"loadtest: concurrency {concurrency}: {raw['errors']} of {raw['errors'] + len(raw['latencies'])} "
            f"requests failed, {raw['timeouts']} of them without an answer within {timeout_s:g} s (--timeout); "
            f"first error: {raw['first_error']}",
            file=sys.stderr,
        )
    return summarize(concurrency, raw["latencies"], raw["errors"], raw["wall_s"])


def run(
    url: str,
    texts: Sequence[str],
    *,
    concurrencies: Sequence[int] = DEFAULT_CONCURRENCY,
    requests: int | None = None,
    duration_s: float | None = None,
    model: str = "sentiment",
    protocol: Protocol = "grpc",
    warmup_requests: int = 8,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> dict[str, Any]:
    """Sweep the concurrency levels; the report is the contract's loadtest JSON. Every request (warm-up
    included) is bounded by `timeout_s`; a request without an answer by then is an error of its level.

    Raises UnavailableError when the model is not ready at `url`: a sweep of nothing but connection
    errors would otherwise read as a (failed) measurement."""
    with SentimentClient(url, protocol=protocol, model=model) as probe:
        probe.wait_ready(READY_TIMEOUT_S)
    common: dict[str, Any] = {"model": model, "protocol": protocol, "timeout_s": timeout_s}
    if warmup_requests:  # unmeasured: its errors are not the sweep's either
        measure_level(url, texts, 1, requests=warmup_requests, **common)
    results = [
        run_level(url, texts, c, requests=requests, duration_s=duration_s, **common) for c in concurrencies
    ]
    return {"url": url, "model": model, "protocol": protocol, "results": results}
