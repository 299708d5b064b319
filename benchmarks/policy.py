"""Policy pack cost: how long the Analyzer round trip takes per stack, and where the time goes.

    python -m benchmarks.policy                       # plans from reports/plan (run `make plan` first)
    python -m benchmarks.policy --plans DIR

Writes reports/bench/policy.json:
- `pack_start_s`: wall time from spawning the pack (its own virtualenv, as the Pulumi CLI does) to the
  port it prints, median of the stacks;
- per stack: resources, wall time of the whole protocol session (start, Handshake, GetAnalyzerInfo,
  Configure, ConfigureStack, Analyze per resource, AnalyzeStack, stop), and gRPC resources/s;
- `in_process_resources_per_s`: the same rules evaluated in-process (no gRPC, no serialisation), the
  floor the protocol overhead is measured against.
Numbers on 2 shared cores are noisy: one run each. The plans are the ones `make policy` would analyse: the same
checks as `python -m policies.analyze` (a copied or renamed plan, two plans of one stack, a `*.json` that is no
plan) refuse the run (exit 2) before the pack starts, as the gate would.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from policies import analyze
from policies.rules import ALL_RULES, Context, evaluate

OUT = Path("reports/bench/policy.json")


def _pack_start(plan: analyze.Plan) -> float:
    t0 = time.perf_counter()
    with analyze.start_pack(plan):
        return time.perf_counter() - t0


def run(plans_dir: Path) -> dict[str, Any]:
    paths = sorted(plans_dir.glob("*.json"))
    if not paths:
        raise SystemExit(f"no plans in {plans_dir}: run `python -m infra.plan --out {plans_dir}` first")
    # A copied plan (prod.json holding dev) was measured as a second "dev", and prod not at all.
    plans = analyze.load_plans(paths)
    stacks: list[dict[str, Any]] = []
    starts = []
    for plan in plans:
        starts.append(_pack_start(plan))
        t0 = time.perf_counter()
        result = analyze.analyze_plan(plan)
        wall = time.perf_counter() - t0
        resources = analyze.to_resources(plan)
        t1 = time.perf_counter()
        repeats = 20
        for _ in range(repeats):
            evaluate(resources, Context(environment=plan.environment))
        in_process = (time.perf_counter() - t1) / repeats
        stacks.append(
            {
                "stack": plan.stack,
                "resources": len(plan.resources),
                "violations": len(result.violations),
                "protocol_session_s": round(wall, 3),
                "grpc_resources_per_s": round(len(plan.resources) / wall, 1),
                "in_process_s": round(in_process, 4),
                "in_process_resources_per_s": round(len(plan.resources) / in_process, 1),
            }
        )
    return {
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        # The CPU is shared: the 1/5/15-minute load average at the end of the run, beside the numbers.
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "rules": len(ALL_RULES),
        "pack_start_s": round(statistics.median(starts), 3),
        "stacks": stacks,
        "total_protocol_s": round(sum(s["protocol_session_s"] for s in stacks), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.policy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--plans", type=Path, default=Path("reports/plan"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    try:
        result = run(args.plans)
    except analyze.PlanError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
