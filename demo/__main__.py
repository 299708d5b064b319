"""`make demo`: the whole lifecycle locally, in 4-6 minutes on an idle 2-core machine.

    python -m demo            # pretrained MiniLM, the `demo` training preset
    python -m demo --fast     # the `smoke` preset: a tiny model, for CI (the gates may promote or reject it)

Writes reports/demo/summary.json and reports/demo/index.html; each stage's log is in
reports/demo/logs/. Exit 0 when every stage ran (whatever the promotion decision, which
the summary reports), 1 when a stage failed (named, with its log kept), 2 when --reports/--work cannot be
used (nothing removed or started; see demo/README.md), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from demo.pipeline import DemoConfig, run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--fast", action="store_true", help="smoke preset and a shorter load test (CI)")
    ap.add_argument("--reports", type=Path, default=Path("reports"), help="report root (default: reports)")
    ap.add_argument(
        "--work",
        type=Path,
        default=Path("runs/demo"),
        help="working folder, emptied on each run (only if empty, new or a previous demo run's)",
    )
    ap.add_argument(
        "--quiet", action="store_true", help="only the stage lines on the console (logs keep everything)"
    )
    args = ap.parse_args(argv)
    # Ctrl-C, SIGTERM (CI cancelling the job, `docker stop`) and SIGHUP (terminal closed) take the same path:
    # the running command's process group, Triton and the moto server are stopped, the summary is written.
    return run(DemoConfig(reports=args.reports, work=args.work, fast=args.fast, quiet=args.quiet))


if __name__ == "__main__":
    sys.exit(main())
