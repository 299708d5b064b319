"""GPU serving benchmark with the production repository (onnxruntime backend, TensorRT), for a lent NVIDIA GPU.

    python -m benchmarks.serve_gpu --bundle runs/bench-serve-train/export         # at most 8 minutes
    python -m benchmarks.serve_gpu --tritonserver /opt/tritonserver/bin/tritonserver --budget-s 300

Runs where NVIDIA's Triton (with its onnxruntime backend) and a GPU are present, e.g. inside
nvcr.io/nvidia/tritonserver:<xx.yy>-py3 with this repository mounted. It builds the repository exactly as
production does (`--backend onnxruntime --gpu`: KIND_GPU classifier, TensorRT fp16 with the serving
profile and an engine cache), starts tritonserver on it and writes reports/bench/serve_gpu.json:
- `startup_s` for a cold start (TensorRT builds the engine) and a warm restart on the same cache (it must
  not rebuild: the engine cache on a volume is what keeps pod restarts fast);
- closed-loop req/s and p50/p99 at concurrency 1, 8, 32, 64 over gRPC, one text per request;
- the classifier's batch sizes (Triton's batch statistics) and `nvidia-smi` before and after.
Every phase checks the remaining budget (`--budget-s`, default 480 s) and is skipped, and said so, when it
would not fit. Exit 2 when no GPU or no onnxruntime backend is found (the message says what is missing).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

OUT = Path("reports/bench/serve_gpu.json")
LEVELS = (1, 8, 32, 64)


def _nvidia_smi() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    query = "name,memory.used,memory.total,utilization.gpu,driver_version"
    done = subprocess.run(
        [exe, f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else None


def _tritonserver(path: str | None) -> Path:
    exe = Path(path) if path else Path(shutil.which("tritonserver") or "/opt/tritonserver/bin/tritonserver")
    if not exe.is_file():
        raise SystemExit(
            f"error: tritonserver not found at {exe}: run inside NVIDIA's Triton image or pass --tritonserver"
        )
    backends = exe.parent.parent / "backends"
    if not (backends / "onnxruntime").is_dir():
        raise SystemExit(
            f"error: {backends}/onnxruntime is missing: the production repository needs NVIDIA's onnxruntime "
            "backend (the pip wheel's tritonserver has only the python backend)"
        )
    return exe


class Server:
    """tritonserver on the production repository; ready timeout generous for the first TensorRT build."""

    def __init__(self, exe: Path, repo: Path, log: Path) -> None:
        from localservers import free_port

        self.exe, self.repo, self.log = exe, repo, log
        self.http, self.grpc, self.metrics = free_port(), free_port(), free_port()
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float) -> float:
        t0 = time.perf_counter()
        cmd = [str(self.exe), f"--model-repository={self.repo}", f"--http-port={self.http}",
               f"--grpc-port={self.grpc}", f"--metrics-port={self.metrics}", "--http-address=127.0.0.1",
               "--grpc-address=127.0.0.1"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        while time.perf_counter() - t0 < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited {self.proc.returncode}: see {self.log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v2/health/ready", timeout=2) as r:
                    if r.status == 200:
                        return time.perf_counter() - t0
            except OSError:
                pass
            time.sleep(1.0)
        raise TimeoutError(f"tritonserver not ready after {timeout_s:.0f} s: see {self.log}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(2)  # SIGINT: Triton drains
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.serve_gpu", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--bundle",
        type=Path,
        default=Path("runs/bench-serve-train/export"),
        help="export bundle (default: the one benchmarks/serve.py trains)",
    )
    ap.add_argument(
        "--tritonserver", help="NVIDIA tritonserver binary (default: on PATH or /opt/tritonserver)"
    )
    ap.add_argument(
        "--precision", choices=("fp32", "int8"), default="fp32", help="fp32: TensorRT runs it in fp16"
    )
    ap.add_argument(
        "--budget-s", type=float, default=480.0, help="stop starting phases after this (default 8 min)"
    )
    ap.add_argument("--requests", type=int, default=2000, help="requests per concurrency level (at most)")
    ap.add_argument("--level-s", type=float, default=20.0, help="seconds per concurrency level (at most)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    deadline = time.monotonic() + args.budget_s
    gpu = _nvidia_smi()
    if gpu is None:
        print(
            "error: no NVIDIA GPU (nvidia-smi missing or failing): run this where a GPU is lent",
            file=sys.stderr,
        )
        return 2
    if not (args.bundle / "metadata.json").is_file():
        print(
            f"error: {args.bundle} is not an export bundle: run `python -m benchmarks.serve` once or pass --bundle",
            file=sys.stderr,
        )
        return 2
    exe = _tritonserver(args.tritonserver)

    from benchmarks.serve_common import batch_histogram, corpus
    from serving.loadtest import measure_level, summarize
    from serving.repository import BuildOptions, build, model_configs

    texts, _ = corpus(600)
    result: dict[str, Any] = {"gpu_before": gpu, "bundle": str(args.bundle), "precision": args.precision,
                              "budget_s": args.budget_s, "skipped": []}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        repo, cache = Path(tmp) / "models", Path(tmp) / "trt-cache"
        cache.mkdir()
        options = BuildOptions(
            backend="onnxruntime", gpu=True, precision=args.precision, trt_cache_path=str(cache)
        )  # type: ignore[arg-type]
        build(args.bundle, repo, options=options)
        max_length = json.loads((args.bundle / "metadata.json").read_text())["max_length"]
        result["classifier_config"] = model_configs(options, 2, max_length=max_length)["classifier"].render()
        server = Server(exe, repo, Path(tmp) / "tritonserver.log")
        try:
            result["startup_s"] = {
                "cold": round(server.start(max(60.0, deadline - time.monotonic() - 60)), 1)
            }
            url, http_url = f"127.0.0.1:{server.grpc}", f"127.0.0.1:{server.http}"
            measure_level(url, texts, 1, requests=32)  # shapes inside the profile: no rebuild expected
            result["trt_cache_files"] = sorted(p.name for p in cache.iterdir())
            rows = []
            for level in LEVELS:
                if deadline - time.monotonic() < args.level_s + 60:
                    result["skipped"].append(f"concurrency {level}: budget")
                    continue
                before = batch_histogram(http_url)
                raw = measure_level(url, texts, level, duration_s=args.level_s)
                row = summarize(level, raw["latencies"][: args.requests], raw["errors"], raw["wall_s"])
                hist = batch_histogram(http_url, before)
                row["classifier_avg_batch"] = round(
                    sum(s * n for s, n in hist.items()) / max(1, sum(hist.values())), 2
                )
                rows.append(row)
                print(
                    f"  c={level}: {row['rps']} req/s, p99 {row['p99_ms']} ms, batch {row['classifier_avg_batch']}"
                )
            result["levels"] = rows
            result["gpu_after"] = _nvidia_smi()
            server.stop()
            if deadline - time.monotonic() > 90:
                warm = Server(exe, repo, Path(tmp) / "tritonserver-warm.log")
                try:
                    result["startup_s"]["warm_same_cache"] = round(
                        warm.start(deadline - time.monotonic() - 10), 1
                    )
                finally:
                    warm.stop()
            else:
                result["skipped"].append("warm restart: budget")
        finally:
            server.stop()
            log = Path(tmp) / "tritonserver.log"
            result["server_log_tail"] = (
                log.read_text(errors="replace").splitlines()[-40:] if log.is_file() else []
            )
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
