"""Hyperparameter search: what pruning saves. The `smoke` preset's search space, 8 trials, the same seeded TPE
sampler, once with the median pruner and once without, side by side in one process.

    python -m benchmarks.tune                 # ~2-4 minutes on 2 CPU cores
    python -m benchmarks.tune --trials 3      # a quick run of the harness

Writes reports/bench/tune.json:
- `pruned` / `unpruned`: the study's wall time (s), best validation accuracy, trials pruned, optimizer steps run
  in all trials (work done), and each trial's state, duration and pruning step.
- `wall_time_ratio`: pruned / unpruned wall time (target: <= 0.40); `cpu_time_ratio` the same in this process's
  CPU seconds and `steps_ratio` in optimizer steps (both far less sensitive than wall time to other processes on
  a shared machine); `best_accuracy_delta_points`: (pruned - unpruned) best validation accuracy x 100 (target:
  within 1 point).
- `load_average_1m` before and after: the machine is shared, so compare the ratio, not the seconds.

A warm-up trial runs first (imports, the split and token caches) so neither study pays for them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

OUT = Path("reports/bench/tune.json")
PRUNERS = {  # as configured in training/tune.py
    "median": "MedianPruner(n_startup_trials=1, n_warmup_steps=0), judged at every validation (every 5 steps)",
    "halving": "SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)",
}


def _study(out: Path, trials: int, pruner: str, seed: int) -> dict[str, Any]:
    from training.tune import TuneConfig, tune

    cfg = TuneConfig(
        preset="smoke",
        output=out,
        trials=trials,
        trial_timeout_s=600,
        sampler="tpe",
        pruner=pruner,
        seed=seed,
    )
    t0, c0 = time.monotonic(), time.process_time()
    assert tune(cfg) == 0
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    record = json.loads((out / "study.json").read_text())
    steps = sum(
        json.loads((out / "trials" / str(t["number"]) / "metrics.json").read_text())["steps"]
        for t in record["trials"]
    )
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "best_val_accuracy": record["best_value"],
        "best_params": record["best_params"],
        "trials_pruned": sum(t["state"] == "PRUNED" for t in record["trials"]),
        "optimizer_steps": steps,
        "trials": record["trials"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pruner", default="median", choices=("median", "halving"))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    os.environ.setdefault("TRAINING_MLFLOW", "0")  # tracking is not what is measured
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        _study(Path(tmp) / "warmup", 1, "none", args.seed)
        # Unpruned first, then pruned: if the machine's load drifts, it is visible in the load averages.
        unpruned = _study(Path(tmp) / "unpruned", args.trials, "none", args.seed)
        pruned = _study(Path(tmp) / "pruned", args.trials, args.pruner, args.seed)
    result = {
        "benchmark": "tune",
        "preset": "smoke",
        "trials": args.trials,
        "sampler": "tpe",
        "seed": args.seed,
        "pruner": PRUNERS[args.pruner],
        "pruned": pruned,
        "unpruned": unpruned,
        "wall_time_ratio": round(pruned["wall_s"] / unpruned["wall_s"], 3),
        "cpu_time_ratio": round(pruned["cpu_s"] / unpruned["cpu_s"], 3),
        "steps_ratio": round(pruned["optimizer_steps"] / unpruned["optimizer_steps"], 3),
        "best_accuracy_delta_points": round(
            100 * (pruned["best_val_accuracy"] - unpruned["best_val_accuracy"]), 2
        ),
        "targets": {"wall_time_ratio_max": 0.40, "best_accuracy_within_points": 1.0},
        "load_average_1m": {"before": load_before, "after": os.getloadavg()[0]},
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
    }
    result["meets_targets"] = (
        result["wall_time_ratio"] <= 0.40 and abs(result["best_accuracy_delta_points"]) <= 1.0
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"pruned {pruned['wall_s']} s vs unpruned {unpruned['wall_s']} s (ratio {result['wall_time_ratio']}); "
        f"best accuracy {pruned['best_val_accuracy']} vs {unpruned['best_val_accuracy']} -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
