"""The issue's targets, evaluated on one benchmarks/serve.py result (status names are an interface)."""

from __future__ import annotations

from typing import Any

from benchmarks.serve_common import TARGETS, at

# Row prefix of each topology's variants in the result ("triton_fp32" is bls, "triton_fused_fp32" fused).
PREFIX = {"bls": "", "fused": "fused_"}


def compare_topologies(result: dict[str, Any]) -> dict[str, Any]:
    """bls vs fused side by side at concurrency 8: server CPU ms per text, p99, req/s (same run, same load)."""
    out: dict[str, Any] = {}
    for precision in ("fp32", "int8"):
        rows = {t: at(result[f"triton_{PREFIX[t]}{precision}"], 8) for t in PREFIX}
        out[precision] = {
            t: {
                "server_cpu_ms_per_text": r["server_cpu_ms_per_text"],
                "p99_ms": r["p99_ms"],
                "rps": r["rps"],
                "graph_avg_batch": r["classifier_avg_batch"],
            }
            for t, r in rows.items()
        }
        out[precision]["fused_over_bls_server_cpu"] = round(
            rows["fused"]["server_cpu_ms_per_text"] / rows["bls"]["server_cpu_ms_per_text"] - 1, 3
        )
    return out


def evaluate_targets(result: dict[str, Any], topology: str | None = None) -> dict[str, Any]:
    """Targets of `topology` (default: result["served_topology"], what BuildOptions ships)."""
    topology = topology or result.get("served_topology", "bls")
    prefix = PREFIX[topology]

    def triton(precision: str) -> list[dict[str, Any]]:
        return result[f"triton_{prefix}{precision}"]

    torch8 = at(result["torch_eager"], 8)
    status: dict[str, Any] = {}
    for precision in ("int8", "fp32"):
        name = f"triton_{precision}_vs_torch_throughput_at_c8"
        triton8 = at(triton(precision), 8)
        ratio = triton8["rps"] / torch8["rps"]
        status[name] = {
            "target": f">= {TARGETS[name]}x PyTorch eager (fair baseline) req/s at concurrency 8",
            "measured": round(ratio, 2),
            "met": ratio >= TARGETS[name],
            # What the rate becomes on dedicated cores: it barely moves when other jobs share the machine.
            "cpu_time_ratio": round(torch8["cpu_ms_per_text"] / triton8["cpu_ms_per_text"], 2),
        }
        limit = result.get("onnxruntime_limit", {}).get(precision)
        if limit:
            # Even a zero-overhead server cannot beat the raw engine: the ratio the hardware allows.
            status[name]["cpu_time_ratio_at_the_engine_limit"] = round(
                torch8["cpu_ms_per_text"] / limit["cpu_ms_per_text"], 2
            )
    p99 = at(triton("int8"), 8)["p99_ms"]
    status["triton_p99_ms_at_c8"] = {
        "target": f"<= {TARGETS['triton_p99_ms_at_c8']} ms (int8, concurrency 8)",
        "measured": p99,
        "met": p99 <= TARGETS["triton_p99_ms_at_c8"],
        "fp32": at(triton("fp32"), 8)["p99_ms"],
        # Latency on shared cores depends on the load average as much as on the server.
        "load_average": result.get("load_average"),
    }
    # Triton's CPU per text (server process tree) vs raw ORT's (tokenize + run + softmax) on the same batches.
    overhead: dict[str, dict[str, float]] = {}
    for precision in ("int8", "fp32"):
        for row in result[f"onnxruntime_{prefix}{precision}"]:
            served = at(triton(precision), row["concurrency"])
            overhead.setdefault(precision, {})[str(row["concurrency"])] = round(
                served["server_cpu_ms_per_text"] / row["cpu_ms_per_text"] - 1, 3
            )
    worst = max(overhead["int8"]["8"], overhead["fp32"]["8"])
    limit = result.get("onnxruntime_limit", {})
    status["triton_overhead_vs_onnxruntime"] = {
        "target": f"Triton server CPU ms per text <= {TARGETS['triton_overhead_vs_onnxruntime']:.0%} over raw "
        "ONNX Runtime on the batches Triton formed (concurrency 8)",
        "measured": worst,
        "met": worst <= TARGETS["triton_overhead_vs_onnxruntime"],
        "by_precision_and_concurrency": overhead,
        "limit_cpu_ms_per_text": {p: v["cpu_ms_per_text"] for p, v in limit.items()},
        "limit_best_batch": {p: v["best_batch"] for p, v in limit.items()},
        "limit_best_threads": {p: v["best_threads"] for p, v in limit.items()},
    }
    batches = {
        f"{p}_c{c}": at(triton(p), c)["classifier_avg_batch"] for p in ("int8", "fp32") for c in (8, 32)
    }
    low = min(batches.values())
    status["classifier_avg_batch_at_c8"] = {
        "target": f">= {TARGETS['classifier_avg_batch_at_c8']} at concurrency 8 and 32",
        "measured": min(batches["int8_c8"], batches["fp32_c8"]),
        "met": low >= TARGETS["classifier_avg_batch_at_c8"],
        "by_precision_and_concurrency": batches,
        "queue_delay_us": result.get("chosen", {}).get(topology, {}).get("queue_delay_us"),
    }
    served = result["served_accuracy"]
    delta = round(100 * (served[f"{prefix}int8"]["accuracy"] - served[f"{prefix}fp32"]["accuracy"]), 2)
    raw = result["accuracy"]
    trained = raw["trained_model"]
    status["int8_accuracy_delta_points"] = {
        "target": f"int8 within {TARGETS['int8_accuracy_delta_points']} point of fp32 on the held-out test split",
        "measured": delta,
        "met": abs(delta) <= TARGETS["int8_accuracy_delta_points"] if trained else None,
        "through": f"the served sentiment endpoint (fp32 and int8 servers, same {served[prefix + 'fp32']['n_texts']}"
        " test texts, 64 per request)",
        "accuracy_fp32": served[f"{prefix}fp32"]["accuracy"],
        "accuracy_int8": served[f"{prefix}int8"]["accuracy"],
        "prediction_agreement": served[f"{prefix}int8"].get("agreement_with_fp32"),
        "raw_graphs_delta_points": raw["accuracy_delta_points"],
        "model": raw.get("model_name"),
        "note": None if trained else "untrained head: accuracy is not meaningful",
    }
    return status
