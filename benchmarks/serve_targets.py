"""The issue's targets, evaluated on one benchmarks/serve.py result (status names are an interface)."""

from __future__ import annotations

from typing import Any

from benchmarks.serve_common import TARGETS, at


def evaluate_targets(result: dict[str, Any]) -> dict[str, Any]:
    torch8 = at(result["torch_eager"], 8)
    status: dict[str, Any] = {}
    for precision in ("int8", "fp32"):
        name = f"triton_{precision}_vs_torch_throughput_at_c8"
        triton8 = at(result[f"triton_{precision}"], 8)
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
    p99 = at(result["triton_int8"], 8)["p99_ms"]
    status["triton_p99_ms_at_c8"] = {
        "target": f"<= {TARGETS['triton_p99_ms_at_c8']} ms (int8, concurrency 8)",
        "measured": p99,
        "met": p99 <= TARGETS["triton_p99_ms_at_c8"],
        "fp32": at(result["triton_fp32"], 8)["p99_ms"],
        # Latency on shared cores depends on the load average as much as on the server.
        "load_average": result.get("load_average"),
    }
    # Triton's CPU per text (server process tree) vs raw ORT's (tokenize + run + softmax) on the same batches.
    overhead: dict[str, dict[str, float]] = {}
    for precision in ("int8", "fp32"):
        for row in result[f"onnxruntime_{precision}"]:
            triton = at(result[f"triton_{precision}"], row["concurrency"])
            overhead.setdefault(precision, {})[str(row["concurrency"])] = round(
                triton["server_cpu_ms_per_text"] / row["cpu_ms_per_text"] - 1, 3
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
    }
    batches = {
        f"{p}_c{c}": at(result[f"triton_{p}"], c)["classifier_avg_batch"]
        for p in ("int8", "fp32")
        for c in (8, 32)
    }
    low = min(batches.values())
    status["classifier_avg_batch_at_c8"] = {
        "target": f">= {TARGETS['classifier_avg_batch_at_c8']} at concurrency 8 and 32",
        "measured": min(batches["int8_c8"], batches["fp32_c8"]),
        "met": low >= TARGETS["classifier_avg_batch_at_c8"],
        "by_precision_and_concurrency": batches,
        "queue_delay_us": result.get("chosen", {}).get("queue_delay_us"),
    }
    acc = result["accuracy"]
    delta_ok = abs(acc["accuracy_delta_points"]) <= TARGETS["int8_accuracy_delta_points"]
    status["int8_accuracy_delta_points"] = {
        "target": f"within {TARGETS['int8_accuracy_delta_points']} point on the test split",
        "measured": acc["accuracy_delta_points"],
        "met": delta_ok if acc["trained_model"] else None,
        "note": None
        if acc["trained_model"]
        else "untrained head: accuracy is not meaningful; see accuracy.prediction_agreement (fp32 vs int8)",
    }
    return status
