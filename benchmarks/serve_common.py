"""Helpers of benchmarks/serve.py: data, the paths' runners, CPU accounting, Triton batch statistics."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Status names are the interface (reports/bench/serve.json `status`).
TARGETS = {
    "triton_int8_vs_torch_throughput_at_c8": 3.0,
    "triton_fp32_vs_torch_throughput_at_c8": 2.0,
    "triton_p99_ms_at_c8": 100.0,
    "triton_overhead_vs_onnxruntime": 0.10,
    "classifier_avg_batch_at_c8": 4.0,
    "int8_accuracy_delta_points": 1.0,
}


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cores() -> int:
    return len(os.sched_getaffinity(0))


def corpus(n: int) -> tuple[list[str], list[int]]:
    from training.config import DataConfig
    from training.data import load

    test = load(DataConfig(max_test_rows=n)).test
    return list(test.texts), list(test.labels)


def trained_bundle(train_dir: Path) -> tuple[Path, Path]:
    """(export bundle, HF model folder) of the demo preset trained by the project's own trainer.

    Reused when `train_dir/export/model.int8.onnx` exists; otherwise `python -m training train --preset
    demo --output train_dir` runs first (what `make demo` trains: MiniLM fine-tuned on 2,600 corpus rows,
    exported with fusions, parity and int8; 1-4 minutes on 2 cores). A trained head makes the int8
    accuracy delta meaningful; the benchmark's texts are the same seeded test split, never trained on.
    """
    import subprocess
    import sys

    bundle, model_dir = train_dir / "export", train_dir / "model"
    if not (bundle / "model.int8.onnx").is_file():
        print(f"training the demo preset into {train_dir} (bundle for the benchmark) ...", flush=True)
        cmd = [sys.executable, "-m", "training", "train", "--preset", "demo", "--output", str(train_dir)]
        subprocess.run(cmd, check=True)
    return bundle, model_dir


def closed_loop(
    fn: Callable[[Any], object], items: Sequence[Any], concurrency: int, requests: int
) -> dict[str, Any]:
    """`concurrency` threads call fn(item) back to back until `requests` calls are done."""
    lock = threading.Lock()
    latencies: list[float] = []
    errors = [0]
    next_index = iter(range(requests))

    def worker() -> None:
        while True:
            with lock:
                i = next(next_index, None)
            if i is None:
                return
            t0 = time.perf_counter()
            try:
                fn(items[i % len(items)])
            except Exception:  # noqa: BLE001 - counted
                with lock:
                    errors[0] += 1
                continue
            with lock:
                latencies.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"latencies": latencies, "errors": errors[0], "wall_s": time.perf_counter() - start}


def process_tree_cpu_s(pid: int) -> float:
    """User+system CPU seconds of a process and its live descendants (tritonserver + python stubs)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def batch_histogram(
    http_url: str, before: dict[int, int] | None = None, model: str = "classifier"
) -> dict[int, int]:
    """{batch size: executions} of `model` from Triton's statistics (all versions), minus `before`."""
    import tritonclient.http as http

    stats = http.InferenceServerClient(http_url).get_inference_statistics(model_name=model)
    hist: dict[int, int] = {}
    for version in stats.get("model_stats", []):
        for row in version.get("batch_stats", []):
            size, count = int(row["batch_size"]), int(row["compute_infer"]["count"])
            hist[size] = hist.get(size, 0) + count
    if before:
        hist = {s: n - before.get(s, 0) for s, n in hist.items()}
    return {s: n for s, n in hist.items() if n > 0}


def ort_session(bundle: Path, precision: str, threads: int = 0) -> Any:
    """The bundle's graph in ONNX Runtime, configured as the served one (threads 0 = cores, spinning off)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or cores()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    model = bundle / ("model.int8.onnx" if precision == "int8" else "model.onnx")
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def ort_tokenizer(bundle: Path) -> tuple[Any, int]:
    """(tokenizer, pad id) as serving/models/sentiment.py sets them up: truncation at max_length and no padding
    of its own. The bundle's tokenizer.json pads each batch to its longest text: kept on, every row would have
    the same length (nothing for length_groups to cut) and an attention mask over its padding."""
    from tokenizers import Tokenizer

    max_length = json.loads((bundle / "metadata.json").read_text())["max_length"]
    tokenizer = Tokenizer.from_file(str(bundle / "tokenizer" / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length)
    pad_id = tokenizer.token_to_id("[PAD]")
    return tokenizer, 0 if pad_id is None else pad_id


def padded(tokenizer: Any, pad_id: int, texts: Sequence[str]) -> tuple[Any, Any, list[int]]:
    """(input_ids, attention_mask, token lengths) of a batch padded to its longest text, as the endpoint pads."""
    import numpy as np

    enc = tokenizer.encode_batch(list(texts))
    lengths = [len(e.ids) for e in enc]
    ids = np.full((len(enc), max(lengths)), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, e in enumerate(enc):
        ids[row, : len(e.ids)], mask[row, : len(e.ids)] = e.ids, 1
    return ids, mask, lengths


def split_logits(
    graph: Callable[[Any, Any], Any], ids: Any, mask: Any, lengths: list[int], overhead: float | None
) -> Any:
    """The batch's logits, `graph(ids, mask)` called once per length-sorted sub-batch that
    serving/models/batching.py cuts at this call cost (None: one padded batch)."""
    import numpy as np

    from serving.models.batching import length_groups

    parts = [
        (rows, graph(ids[rows, :width], mask[rows, :width]))
        for rows, width in length_groups(lengths, overhead)
    ]
    logits = np.empty((len(lengths), parts[0][1].shape[1]), dtype=np.float32)
    for rows, part in parts:
        logits[rows] = part
    return logits


def ort_runner(bundle: Path, precision: str, threads: int = 0) -> Callable[[Sequence[str]], Any]:
    """Raw ONNX Runtime in-process, configured as the served graph (threads 0 = cores): tokenize, run, softmax.
    A batch runs as the same length-sorted sub-batches the served endpoint cuts on CPU (serving/models/batching.py,
    BuildOptions' CPU default), so that the comparison with Triton is engine against engine, not cut against none."""
    import numpy as np

    from serving.options import LENGTH_SPLIT_OVERHEAD_CPU

    session = ort_session(bundle, precision, threads)
    tokenizer, pad_id = ort_tokenizer(bundle)

    def graph(ids: Any, mask: Any) -> Any:
        return session.run(["logits"], {"input_ids": ids, "attention_mask": mask})[0]

    def run(batch: Sequence[str]) -> Any:
        ids, mask, lengths = padded(tokenizer, pad_id, batch)
        logits = split_logits(graph, ids, mask, lengths, LENGTH_SPLIT_OVERHEAD_CPU)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return run


def pooled_rows(
    pools: dict[str, dict[int, dict[str, Any]]], histograms: dict[str, dict[int, dict[int, int]]]
) -> dict[str, Any]:
    from serving.loadtest import summarize

    out: dict[str, Any] = {}
    for name, levels in pools.items():
        rows = []
        for level, p in sorted(levels.items()):
            texts = max(1, p["texts"])
            if p["latencies"]:
                row = summarize(level, p["latencies"], p["errors"], p["wall_s"])
            else:  # raw ORT: one caller running Triton's batches back to back
                row = {"concurrency": level, "rps": round(texts / p["wall_s"], 2)}
            row["cpu_ms_per_text"] = round(1000 * (p["cpu_s"] + p["server_cpu_s"]) / texts, 2)
            if name.startswith("triton"):
                row["server_cpu_ms_per_text"] = round(1000 * p["server_cpu_s"] / texts, 2)
                row["client_cpu_ms_per_text"] = round(1000 * p["cpu_s"] / texts, 2)
            key = name.split("_", 1)[1]  # fp32, int8, fused_fp32, fused_int8
            if name.startswith(("triton", "onnxruntime")):
                hist = histograms[key].get(level, {})
                executions = sum(hist.values())
                row["classifier_batch_sizes"] = {str(s): n for s, n in sorted(hist.items())}
                row["classifier_avg_batch"] = round(
                    sum(s * n for s, n in hist.items()) / max(1, executions), 2
                )
            rows.append(row)
        out[name] = rows
    return out


def at(rows: Sequence[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    return next(r for r in rows if r["concurrency"] == concurrency)


def served_accuracy(
    grpc_url: str, texts: Sequence[str], labels: Sequence[int], names: Sequence[str]
) -> dict[str, Any]:
    """Accuracy of the answers of the running `sentiment` endpoint (64 texts per request)."""
    from serving.client import SentimentClient

    client = SentimentClient(grpc_url, protocol="grpc", timeout_s=60)
    predicted = []
    for i in range(0, len(texts), 64):
        predicted += [names.index(p.label) for p in client.classify(list(texts[i : i + 64]))]
    correct = sum(int(p == y) for p, y in zip(predicted, labels, strict=True))
    return {"n_texts": len(texts), "accuracy": round(correct / len(texts), 4), "predicted": predicted}


def accuracy(bundle: Path, texts: Sequence[str], labels: Sequence[int]) -> dict[str, Any]:
    import numpy as np
    import transformers

    from training.export import onnx_logits

    meta = json.loads((bundle / "metadata.json").read_text())
    tokenizer = transformers.AutoTokenizer.from_pretrained(bundle / "tokenizer")
    fp32 = onnx_logits(bundle / "model.onnx", tokenizer, texts, meta["max_length"]).argmax(axis=1)
    int8 = onnx_logits(bundle / "model.int8.onnx", tokenizer, texts, meta["max_length"]).argmax(axis=1)
    y = np.asarray(labels)
    acc32, acc8 = float((fp32 == y).mean()), float((int8 == y).mean())
    return {
        "n_texts": len(texts),
        "through": "the raw graphs (model.onnx / model.int8.onnx) in-process, padded to max_length",
        "model_name": meta.get("model_name"),
        "trained_model": meta.get("trained", True) is not False,
        "accuracy_fp32": round(acc32, 4),
        "accuracy_int8": round(acc8, 4),
        "accuracy_delta_points": round(100 * (acc8 - acc32), 2),
        "prediction_agreement": round(float((fp32 == int8).mean()), 4),
    }
