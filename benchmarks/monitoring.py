"""Monitoring costs and detection: drift job speed, the inference record's latency overhead, detection.

    python -m benchmarks.monitoring                              # tiny model, ~5 minutes on 2 shared cores
    python -m benchmarks.monitoring --bundle runs/demo/train/export --rounds 3

Writes reports/bench/monitoring.json:
- `drift_10k`: monitoring.drift.compute on 10,000 records (clean, drawn with replacement from the test
  split) against 2,000 reference records of the training split; wall seconds (Evidently already imported,
  its import time reported beside it). Target: < 30 s on 2 cores.
- `record_overhead`: the serving benchmark's phase (benchmarks/serve_records.py) on its model, the demo
  preset's MiniLM (`--bundle` overrides it, not the tiny model, whose p99 is within noise either way): two
  real tritonservers on the default build, records off (MONITORING_SAMPLE_RATE unset) and on (rate 1.0,
  every request, to a local folder), closed-loop load at concurrency 8 alternating between them in ABBA
  order for `--rounds` pairs; p99 ratio on/off per pair, median and pooled. Target: <= 1.05.
- `detection`: 5 clean windows (test split, seeds 0-4) and one shifted window (Python documentation).
Each phase records os.getloadavg() before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("DO_NOT_TRACK", "1")

TARGETS = {"drift_10k_s": 30.0, "p99_ratio": 1.05}


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def manifest_for(out: Path) -> Path:
    from training.config import DataConfig
    from training.data import load

    path = out / "manifest.json"
    path.write_text(json.dumps(load(DataConfig()).manifest))
    return path


def bench_drift(bundle: Path, manifest: Path) -> dict[str, Any]:
    import pandas as pd

    from monitoring import reference, samples

    started = loadavg()
    t0 = time.perf_counter()
    import evidently  # noqa: F401 - timed apart from the computation

    from monitoring import drift

    import_s = time.perf_counter() - t0
    ref = pd.DataFrame(reference.build(manifest, bundle, rows=2000))
    test_texts, _, _ = reference.split_texts(manifest, "test")
    big = pd.DataFrame(reference.records_for_texts(random.Random(0).choices(test_texts, k=10_000), bundle))
    t0 = time.perf_counter()
    report = drift.compute(ref, big).report
    drift_s = time.perf_counter() - t0
    detection: dict[str, Any] = {"clean": []}
    for seed in range(5):
        cur = pd.DataFrame(reference.records_for_texts(samples.clean_texts(manifest, 300, seed), bundle))
        r = drift.compute(ref, cur).report
        detection["clean"].append({"seed": seed, "drift_detected": r["drift_detected"], "score": r["score"]})
    cur = pd.DataFrame(reference.records_for_texts(samples.shifted_texts(300, 0), bundle))
    r = drift.compute(ref, cur).report
    detection["shifted"] = {"drift_detected": r["drift_detected"], "score": r["score"],
                            "drifted": [k for k, v in r["features"].items() if v["drifted"]]}  # fmt: skip
    return {
        "drift_10k": {
            "records": 10_000,
            "reference_records": 2000,
            "seconds": round(drift_s, 2),
            "evidently_import_s": round(import_s, 2),
            "drift_detected_on_clean_10k": report["drift_detected"],
            "target_s": TARGETS["drift_10k_s"],
            "met": drift_s < TARGETS["drift_10k_s"],
            "loadavg_before": started,
            "loadavg_after": loadavg(),
        },  # fmt: skip
        "detection": {
            **detection,
            "met": detection["shifted"]["drift_detected"]
            and not any(c["drift_detected"] for c in detection["clean"]),
        },  # fmt: skip
    }


def bench_overhead(bundle: Path | None, manifest: Path, rounds: int, requests: int) -> dict[str, Any]:
    """The inference record's p99 cost, measured the way the serving benchmark does (same code, same model)."""
    from benchmarks.serve import TRAIN_DIR
    from benchmarks.serve_common import trained_bundle
    from benchmarks.serve_records import record_overhead
    from monitoring import samples

    model = bundle or trained_bundle(TRAIN_DIR)[0]
    texts = samples.clean_texts(manifest, 500, 0)
    return record_overhead(model, texts, pairs=rounds, requests=requests)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, help="export bundle (default: a tiny random model made here)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--out", type=Path, default=Path("reports/bench/monitoring.json"))
    ap.add_argument("--skip-overhead", action="store_true", help="drift and detection only (no tritonserver)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-monitoring-") as tmp:
        work = Path(tmp)
        bundle = args.bundle
        if bundle is None:
            from training.export import make_tiny_bundle

            bundle = make_tiny_bundle(work / "export", seed=0, quantize=False)
        manifest = manifest_for(work)
        result: dict[str, Any] = {"bundle": str(args.bundle or "tiny random model (training.export.make_tiny_bundle)"),
                                  "cores": os.cpu_count(), "loadavg_start": loadavg()}  # fmt: skip
        result.update(bench_drift(bundle, manifest))
        if not args.skip_overhead:
            result["record_overhead"] = bench_overhead(args.bundle, manifest, args.rounds, args.requests)
        result["loadavg_end"] = loadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "record_overhead"}, indent=2))
    if "record_overhead" in result:
        print("record overhead p99 ratio (median):", result["record_overhead"]["p99_ratio_median"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
