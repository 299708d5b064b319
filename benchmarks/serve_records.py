"""The inference record's cost on p99 latency (issue 13), on the model benchmarks/serve.py serves.

    python -m benchmarks.serve_records             # the demo-preset MiniLM bundle of benchmarks/serve.py
    python -m benchmarks.serve_records --pairs 4 --requests 200     # quicker, noisier

Also the last phase of `python -m benchmarks.serve`. Two real tritonservers on one repository (the
default `serving build`: what the demo and the local image serve), started side by side and both kept
running: one with records off (MONITORING_SAMPLE_RATE unset), one recording every request (rate 1.0,
the most a stack can ask for; a local folder as the sink, the records' own writer thread and buffer as in
production). Closed-loop load at concurrency 8, one text per request, alternates between the two in ABBA
order (off, on, on, off, ...), so load from other jobs on the shared cores hits both alike. Reported: p99
per run, the on/off p99 ratio per pair and its median, the ratio of the pooled p99s, records written and
dropped, and the load average around each run. Target: p99 ratio <= 1.05 ("both ways": on and off,
measured in the same run). The phase writes `record_overhead` into each JSON it is given (--out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.serve_common import loadavg

TARGET_P99_RATIO = 1.05
CONCURRENCY = 8
OUTS = (Path("reports/bench/serve.json"), Path("reports/bench/monitoring.json"))
RECORD_VARS = ("MONITORING_SAMPLE_RATE", "MONITORING_RECORDS_URL")


def _server(repo: Path, records: Path | None) -> Any:
    from serving.server import TritonServer

    class Server(TritonServer):
        def environment(self) -> dict[str, str]:
            env = {k: v for k, v in super().environment().items() if k not in RECORD_VARS}
            if records is not None:
                env.update({"MONITORING_SAMPLE_RATE": "1", "MONITORING_RECORDS_URL": str(records)})
            return env

    return Server(repo, http_port=0, grpc_port=0, metrics_port=0)


def _counters(metrics_url: str) -> dict[str, float]:
    """ml_inference_records_{written,dropped}_total from Triton's /metrics (the model's own counters)."""
    import urllib.request

    out = {"written": 0.0, "dropped": 0.0}
    with urllib.request.urlopen(metrics_url, timeout=10) as response:  # noqa: S310 - 127.0.0.1
        for line in response.read().decode().splitlines():
            for name in out:
                if line.startswith(f"ml_inference_records_{name}_total"):
                    out[name] += float(line.rsplit(" ", 1)[1])
    return out


def record_overhead(
    bundle: Path, texts: Sequence[str], *, pairs: int = 6, requests: int = 300
) -> dict[str, Any]:
    """Records on vs off at concurrency 8 on the default build of `bundle`; see the module docstring."""
    from serving.loadtest import measure_level, percentile
    from serving.repository import BuildOptions, build

    options = BuildOptions()
    with tempfile.TemporaryDirectory(prefix="bench-records-") as tmp:
        work = Path(tmp)
        repo = work / "models"
        build(bundle, repo, options=options)
        records = work / "records"
        runs: list[dict[str, Any]] = []
        pooled: dict[str, list[float]] = {"off": [], "on": []}
        with _server(repo, None) as off, _server(repo, records) as on:
            servers = {"off": off, "on": on}
            for server in servers.values():  # warm both: ORT's first runs, the recorder's first file
                measure_level(server.grpc_url, texts, CONCURRENCY, requests=64, protocol="grpc")
            for pair in range(pairs):
                order = ("off", "on") if pair % 2 == 0 else ("on", "off")  # ABBA
                for mode in order:
                    before = loadavg()
                    raw = measure_level(
                        servers[mode].grpc_url, texts, CONCURRENCY, requests=requests, protocol="grpc"
                    )
                    ms = [1000 * x for x in raw["latencies"]]
                    pooled[mode] += ms
                    runs.append({
                        "pair": pair, "records": mode, "p50_ms": round(percentile(ms, 50), 2),
                        "p99_ms": round(percentile(ms, 99), 2), "rps": round(len(ms) / raw["wall_s"], 1),
                        "errors": raw["errors"], "loadavg_before": before, "loadavg_after": loadavg(),
                    })  # fmt: skip
            counters = _counters(on.metrics_url)
        files = list(records.glob("**/part-*.jsonl"))
        written_lines = sum(1 for f in files for _ in f.open())
    by_pair = {(r["pair"], r["records"]): r for r in runs}
    ratios = [by_pair[(p, "on")]["p99_ms"] / by_pair[(p, "off")]["p99_ms"] for p in range(pairs)]
    p99 = {mode: percentile(ms, 99) for mode, ms in pooled.items()}
    p50 = {mode: percentile(ms, 50) for mode, ms in pooled.items()}
    median = statistics.median(ratios)
    return {
        "model": str(bundle),
        "build": {"topology": options.topology, "precision": options.precision, "backend": options.backend},
        "concurrency": CONCURRENCY,
        "requests_per_run": requests,
        "pairs": pairs,
        "order": "ABBA: off,on then on,off, alternating per pair",
        "records": "on = MONITORING_SAMPLE_RATE 1 (every request), local folder sink; off = unset",
        "runs": runs,
        "p99_ratio_per_pair": [round(x, 3) for x in ratios],
        "p99_ratio_median": round(median, 3),
        "p99_ms_pooled": {k: round(v, 2) for k, v in p99.items()},
        "p99_ratio_pooled": round(p99["on"] / p99["off"], 3),
        "p50_ratio_pooled": round(p50["on"] / p50["off"], 3),
        "records_written": written_lines,
        "record_counters_at_last_request": counters,
        "target_ratio": TARGET_P99_RATIO,
        "met": median <= TARGET_P99_RATIO,
        "loadavg": {"start": runs[0]["loadavg_before"], "end": runs[-1]["loadavg_after"]},
    }


def write_into(paths: Sequence[Path], block: dict[str, Any]) -> None:
    """Set `record_overhead` in each existing JSON report (the rest of each file is left as it is)."""
    for path in paths:
        data = json.loads(path.read_text()) if path.is_file() else {}
        data["record_overhead"] = block
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    from benchmarks.serve import TRAIN_DIR
    from benchmarks.serve_common import corpus, trained_bundle

    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.serve_records", description=__doc__.split("\n")[0]
    )
    ap.add_argument(
        "--bundle", type=Path, help=f"export bundle (default: the one in {TRAIN_DIR}, trained if missing)"
    )
    ap.add_argument("--pairs", type=int, default=6, help="off/on pairs (ABBA order)")
    ap.add_argument("--requests", type=int, default=300, help="requests per run")
    ap.add_argument("--texts", type=int, default=600, help="test-split texts to send")
    ap.add_argument(
        "--out", type=Path, action="append", help=f"JSON to update (default: {', '.join(map(str, OUTS))})"
    )
    args = ap.parse_args(argv)
    if args.pairs < 1 or args.requests < 100:
        ap.error("--pairs must be >= 1 and --requests >= 100 (a p99 needs at least 100 latencies)")
    bundle = args.bundle or trained_bundle(TRAIN_DIR)[0]
    if not (bundle / "model.onnx").is_file():
        ap.error(f"--bundle {bundle} has no model.onnx: pass an export bundle (training export)")
    texts, _ = corpus(args.texts)
    block = record_overhead(bundle, texts, pairs=args.pairs, requests=args.requests)
    write_into(args.out or OUTS, block)
    print(json.dumps({k: v for k, v in block.items() if k != "runs"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
