"""``python -m pipeline {run,render,step}``. Only argparse at start: --help imports nothing heavy."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import signal
import sys
from pathlib import Path

from pipeline import dag

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
TUNE_ONLY = ("trials", "trial_timeout")
"""Given without --mode tune, these used to be dropped in silence: a plain training ran instead of the study."""


def _param_args(p: argparse.ArgumentParser) -> None:
    defaults = dag.Params()
    for f in dataclasses.fields(dag.Params):
        if f.name in ("force", "work"):
            continue
        default = None if f.name in TUNE_ONLY else getattr(defaults, f.name)  # None: not given
        p.add_argument(dag.flag(f.name), default=default, help=f"default {getattr(defaults, f.name)!r}")
    p.add_argument(
        "--work", default=None, help="working folder, one run's own (default runs/pipeline/<run id>)"
    )


def _params(args: argparse.Namespace, force: bool, run_id: str) -> dag.Params:
    defaults = dag.Params()
    values = {
        f.name: getattr(defaults, f.name) if getattr(args, f.name) is None else getattr(args, f.name)
        for f in dataclasses.fields(dag.Params)
        if f.name not in ("force", "work")
    }
    # Each run its own folder: a timestamp alone gave two runs started in the same second (two environments'
    # cron entries) one WORK, one candidate trained by both.
    work = args.work or f"runs/pipeline/{run_id}"
    return dag.Params(**values, work=work, force="true" if force else "false")


def _usage_problems(args: argparse.Namespace) -> list[str]:
    if args.mode == "tune":
        return []
    given = [dag.flag(name) for name in TUNE_ONLY if getattr(args, name) is not None]
    return [f"{flag} applies to a study only: add --mode tune (or drop {flag})" for flag in given]


def _run(args: argparse.Namespace) -> int:
    from pipeline import runner, supervise

    run_id = runner.new_run_id()
    params = _params(args, args.force, run_id)
    bad = _usage_problems(args) + runner.problems(params)
    if not args.dry_run:  # the files' existence is the run's business, not the plan's
        bad += runner.missing_inputs(params)
    for problem in bad:
        print(f"error: {problem}", file=sys.stderr)
    if bad:
        return EXIT_USAGE
    if args.dry_run:
        for item in runner.plan(params):
            cond = f"  [when {item['when']} is true]" if item["when"] else ""
            deps = f"  after {', '.join(item['depends'])}" if item["depends"] else ""
            # shlex.join: an empty value (no --serving-image given) shows as '' and the line stays copyable
            print(f"{item['step']}:{deps}{cond}\n    {shlex.join(item['command'])}")
            if item["condition"]:
                print(f"    decides: {item['condition']}")
        return 0
    signal.signal(signal.SIGTERM, _interrupt)  # a cancelled CI job (runner.run handles it once it runs)
    try:
        record = runner.run(params, run_id=run_id)
    except supervise.Refused as exc:  # before any step ran: WORK in use, or taken since the check above
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        where = (
            f"the run record {exc.args[0]} says where it stopped" if exc.args else "no run record was written"
        )
        print(f"interrupted: {where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    # A record only in WORK is a failed run too: the promotion history beside it in the store misses it. A failed
    # step is one whatever the outcome reads: "promoted, but its drift reference was not written" exited 0.
    failed = any(step["status"] == "failed" for step in record["steps"])
    return 1 if failed or "record_error" in record else 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


TEAM_PARAMS = ("model", "data", "labels", "text_column", "label_column")
"""What `render` takes beyond the stack's locations: without them every rendered workflow trained the demo's data
and promoted it as `sentiment`."""

# Where `render` has no stack to read them from (infra/k8s/argo.py sets the stack's buckets): placeholders a user
# replaces, in the form the pods need. The local runner's defaults are repository paths no pod has.
RENDER_LOCATIONS = {
    "store": "s3://BUCKET/model-store",
    "reference": "s3://BUCKET/reference/",
    "current": "s3://LOGS-BUCKET/inference/",
}


def _render(args: argparse.Namespace) -> int:
    from pipeline import argo

    for name in RENDER_LOCATIONS:
        value = getattr(args, name)
        if "://" not in value or value.startswith("file://"):
            print(
                f"error: --{name} {value!r} is a path on this machine; the workflow's pods have no repository "
                f"or local disk of yours: give a bucket URL (e.g. {RENDER_LOCATIONS[name]})",
                file=sys.stderr,
            )
            return 2
    from pipeline import cron, runner
    from promotion.config import load_config
    from promotion.errors import ConfigError

    bad = [
        f"{dag.flag(name)}: {why}"
        for name, why in runner.data_problems(
            dag.Params(preset=args.preset, **{name: getattr(args, name) for name in TEAM_PARAMS})
        )
    ]
    try:  # as `run` checks it: an unknown one was rendered, and each run failed at `promote`, after its training
        load_config(None).environment(args.env)
    except ConfigError as exc:
        bad.append(f"--env {args.env}: {exc}")
    # Argo refuses such a schedule only once the objects are applied; no run would ever start.
    schedule_problem = None if args.schedule is None else cron.problem(args.schedule)
    if schedule_problem:
        bad.append(f"--schedule {args.schedule!r}: {schedule_problem}; give {cron.EXAMPLE}")
    if args.out and args.out.exists() and not args.out.is_dir():
        bad.append(f"--out {args.out} is a file: give the folder to write retrain-{args.env}.yaml into")
    for problem in bad:
        print(f"error: {problem}", file=sys.stderr)
    if bad:
        return EXIT_USAGE
    docs = argo.render(
        training_image=args.training_image,
        environment=args.env,
        schedule=args.schedule,
        params=dag.Params(
            store=args.store,
            env=args.env,
            preset=args.preset,
            mode=args.mode,
            serving_image=args.serving_image,
            reference=args.reference,
            current=args.current,
            **{name: getattr(args, name) for name in TEAM_PARAMS},
        ),
    )
    text = argo.to_yaml(docs)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"retrain-{args.env}.yaml").write_text(text, encoding="utf-8")
        print(json.dumps({"wrote": str(args.out / f"retrain-{args.env}.yaml")}))
    else:
        sys.stdout.write(text)
    return 0


def parser() -> argparse.ArgumentParser:
    from pipeline import __doc__ as doc
    from pipeline import steps

    ap = argparse.ArgumentParser(
        prog="python -m pipeline", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run the retraining DAG locally, step by step (exit 1 if a step failed)")
    _param_args(p)
    p.add_argument("--force", action="store_true", help="retrain whatever drift, data and schedule say")
    p.add_argument("--dry-run", action="store_true", help="print the plan of steps only")
    p.set_defaults(func=_run)
    p = sub.add_parser("render", help="Argo WorkflowTemplate + CronWorkflow for one environment (YAML)")
    p.add_argument(
        "--training-image", required=True, help="pinned training image (stack output training_image)"
    )
    p.add_argument(
        "--serving-image", default="", help="CI-built serving image to promote (stack output serving_image)"
    )
    p.add_argument("--env", default="dev")
    p.add_argument("--schedule", default=None, help="cron (default: pipeline/argo.py per environment)")
    p.add_argument("--store", default=RENDER_LOCATIONS["store"], help="promotion store (bucket prefix)")
    p.add_argument(
        "--reference",
        default=RENDER_LOCATIONS["reference"],
        help="drift reference records (bucket prefix; stack: the models bucket's reference/)",
    )
    p.add_argument(
        "--current",
        default=RENDER_LOCATIONS["current"],
        help="inference records the drift check reads (bucket prefix; stack: the logs bucket's inference/)",
    )
    p.add_argument("--preset", default="gpu")
    p.add_argument("--mode", default="train", choices=("train", "tune"))
    for name in TEAM_PARAMS:  # a team's own model: its name, its dataset, the dataset's columns and classes
        p.add_argument(dag.flag(name), default=getattr(dag.Params(), name))
    p.add_argument("--out", type=Path, default=None)
    p.set_defaults(func=_render)
    steps.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    from pipeline.steps import StoreUnreadable

    args = parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except StoreUnreadable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
