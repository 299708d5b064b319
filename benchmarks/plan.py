"""Time to render every committed stack offline (what `make plan` does).

    python -m benchmarks.plan [--repeat 1]   -> reports/bench/plan.json

Cold: a fresh interpreter renders all stacks once (SDK imports included, as `make plan` pays them).
Warm: the same process renders each stack again (imports done: the program itself and the mock engine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from infra import plan as planner

OUT = Path("reports/bench/plan.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="warm renders per stack")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    stacks = planner.committed_stacks()

    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "infra.plan", "--out", tmp], check=True, capture_output=True)
        cold_s = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU seconds do not grow with other processes' load the way wall time does on a shared machine.
        cold_cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

        planner.render(stacks, Path(tmp))  # imports
        warm: dict[str, list[float]] = {s: [] for s in stacks}
        resources: dict[str, int] = {}
        for _ in range(args.repeat):
            for stack in stacks:
                t = time.perf_counter()
                document = planner.render([stack], Path(tmp))[stack]
                warm[stack].append(time.perf_counter() - t)
                resources[stack] = len(document["resources"])

    result = {
        "benchmark": "plan",
        "stacks": stacks,
        "cold_all_stacks_s": round(cold_s, 2),
        "cold_all_stacks_cpu_s": round(cold_cpu_s, 2),
        "warm_per_stack_s": {s: round(min(v), 3) for s, v in warm.items()},
        "warm_all_stacks_s": round(sum(min(v) for v in warm.values()), 2),
        "resources": resources,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
