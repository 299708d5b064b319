"""Wall time of `make demo` against its budget (6 minutes on 2 CPU cores), stage by stage.

    python -m benchmarks.demo            # the full demo (demo preset)   -> reports/bench/demo.json
    python -m benchmarks.demo --fast     # the CI variant (smoke preset)  -> reports/bench/demo-fast.json

Runs `python -m demo` in a fresh interpreter with its outputs in a temporary folder (so it does
not replace reports/demo), then records the total and per-stage seconds from its summary, the
machine's core count and the 1-minute load average before and after (a busy machine explains a
slow run). One run: noisy. Ctrl-C, SIGTERM or SIGHUP reach the demo, which stops what it started; an
interrupted run writes no JSON (exit 130).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_S = 360.0
INTERRUPTED = 130


def run_demo(cmd: list[str]) -> int:
    """The demo's exit code. A signal to this process is passed on and the demo is waited for: it stops its
    moto server, tritonserver and commands itself (each in a session of its own, which nothing else stops).
    subprocess.call SIGKILLed it 0.25 s after a Ctrl-C, and a SIGTERM (make cancelled) left it running."""
    proc = subprocess.Popen(cmd)

    def forward(signum: int, frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    stop_signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, forward) for sig in stop_signals}
    try:
        return proc.wait()
    finally:
        for sig, handler in previous.items():
            if handler is not None:  # None: set outside Python, cannot be put back from here
                signal.signal(sig, handler)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.demo", description=__doc__.split("\n")[0])
    ap.add_argument("--fast", action="store_true", help="the smoke-preset variant CI runs")
    args = ap.parse_args()
    out = Path("reports/bench") / ("demo-fast.json" if args.fast else "demo.json")
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "demo",
            "--quiet",
            "--reports",
            f"{tmp}/reports",
            "--work",
            f"{tmp}/work",
        ]
        load_before = os.getloadavg()[0]
        start = time.monotonic()
        code = run_demo([*cmd, *(["--fast"] if args.fast else [])])
        wall = time.monotonic() - start
        summary_path = Path(tmp) / "reports" / "demo" / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    if code == INTERRUPTED or code < 0:
        print(f"benchmarks.demo: the demo was interrupted (exit {code}): {out} not written", file=sys.stderr)
        return INTERRUPTED
    result = {
        "benchmark": "demo",
        "preset": summary.get("preset"),
        "exit_code": code,
        "wall_s": round(wall, 1),
        "budget_s": BUDGET_S,
        "within_budget": code == 0 and wall <= BUDGET_S,
        "stages_s": {s["name"]: s["seconds"] for s in summary.get("stages", [])},
        "failed_stage": summary.get("failed_stage"),
        "test_accuracy": (summary.get("train") or {}).get("test_accuracy"),
        "loadtest": (summary.get("serve") or {}).get("loadtest"),
        "promotion_decision": (summary.get("promotion") or {}).get("decision"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_1min_before": round(load_before, 2), "load_1min_after": round(os.getloadavg()[0], 2)},
    }  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
