"""Command line of the monitoring jobs (exit 0 done, 1 drift detected with --fail-on-drift, 2 bad input).

python -m monitoring drift --reference REF --current CUR --out DIR [--since ISO | --window 24h] [--until ISO]
    REF: reference records (.jsonl file or prefix), or a training manifest.json (with --bundle, or its
    run folder's export/ beside it)
    CUR: the records prefix (local, s3://, gs://, az://) or a .jsonl file; writes DIR/drift.json,
    DIR/drift.html and DIR/metrics.prom; pushes the gauges when MONITORING_PUSHGATEWAY_URL is set
python -m monitoring reference --manifest runs/demo/train/manifest.json --bundle runs/demo/train/export --out ref.jsonl
python -m monitoring evaluate --url 127.0.0.1:8000 --manifest M --bundle B --out DIR [--rows 500]
    sends the test split's labelled sample through the live endpoint: accuracy, F1, AUC vs training
python -m monitoring texts --manifest M --out clean.txt    (or --shifted: another domain; demo, checks)
python -m monitoring budget --cloud aws --budget mlp-dev-monthly --stack dev [--out DIR]
    (or --cloud azure --scope /subscriptions/<id>/resourceGroups/<rg>, or --cloud gcp --subscription
    projects/<p>/subscriptions/<s>: the budget's Pub/Sub notifications): the budget's limit and month-end
    forecast as ml_budget_limit_eur / ml_budget_forecast_eur (pushed like the other jobs' gauges)
python -m monitoring env
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from monitoring.errors import InputError

DAMAGED_NAMED = 100
"""Cut lines named in drift.json (all are counted): at most one per file, but a window can hold many files."""


def _rows(value: str) -> int:
    """--rows: a count of texts or records, >= 1 (0 or less ended in a traceback, exit 1)."""
    try:
        rows = int(value)
    except ValueError:
        rows = 0
    if rows < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return rows


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m monitoring", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("drift", help="drift of a window of inference records against the training reference")
    d.add_argument(
        "--reference", required=True, help="reference records (.jsonl / prefix) or a manifest.json"
    )
    d.add_argument(
        "--current", required=True, help="inference records: a prefix (date= partitions) or a .jsonl"
    )
    d.add_argument(
        "--out", required=True, help="report folder, or an object-storage prefix (s3://, gs://, abfs://)"
    )
    d.add_argument(
        "--bundle",
        type=Path,
        help="export bundle of a manifest.json reference (default: the export/ beside it)",
    )
    d.add_argument("--since", help="window start, ISO 8601 (records with ts >= since; no offset = UTC)")
    d.add_argument("--window", help="the window ending now, e.g. 24h, 90m, 7d (instead of --since)")
    d.add_argument("--until", help="window end, ISO 8601 UTC (records with ts < until)")
    d.add_argument("--threshold", type=float, default=None, help="share of drifted features that is drift")
    d.add_argument("--model", default="sentiment", help="model label of the pushed gauges")
    d.add_argument("--data-encoding", help="CSV encoding of the manifest's dataset (e.g. latin-1)")
    d.add_argument("--fail-on-drift", action="store_true", help="exit 1 when drift is detected")
    r = sub.add_parser("reference", help="reference records from the training split (manifest + bundle)")
    r.add_argument("--manifest", required=True, type=Path)
    r.add_argument("--bundle", required=True, type=Path)
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--rows", type=_rows, default=2000)
    r.add_argument("--data-encoding")
    e = sub.add_parser("evaluate", help="quality on a labelled sample sent through the live endpoint")
    e.add_argument("--url", required=True, help="Triton endpoint host:port (HTTP)")
    e.add_argument(
        "--manifest", required=True, type=Path, help="training manifest.json: its test split is the sample"
    )
    e.add_argument("--bundle", required=True, type=Path, help="the promoted bundle: its metrics are the bar")
    e.add_argument("--out", required=True, type=Path)
    e.add_argument("--rows", type=_rows, default=500)
    e.add_argument("--model", default="sentiment")
    e.add_argument("--data-encoding")
    w = sub.add_parser(
        "texts", help="a window of texts, one per line: clean (test split) or --shifted (another domain)"
    )
    w.add_argument("--out", required=True, type=Path)
    w.add_argument("--rows", type=_rows, default=300)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--manifest", type=Path, help="training manifest.json (clean window: its test split)")
    w.add_argument("--shifted", action="store_true", help="Python documentation sentences instead")
    w.add_argument("--data-encoding")
    b = sub.add_parser("budget", help="the stack's budget limit and month-end forecast as gauges (cost job)")
    b.add_argument("--cloud", required=True, choices=["aws", "azure", "gcp"])
    b.add_argument("--budget", required=True, help="budget name (infra: <stack name>-monthly)")
    b.add_argument("--stack", required=True, help="stack label of the gauges (the alert groups by it)")
    b.add_argument("--out", type=Path, help="also write DIR/metrics.prom")
    b.add_argument("--account-id", help="AWS account (default: the caller's, from STS)")
    b.add_argument("--scope", help="Azure: the budget's scope, /subscriptions/<id>/resourceGroups/<rg>")
    b.add_argument(
        "--subscription",
        help="GCP: the budget notifications' pull subscription, projects/<p>/subscriptions/<s>",
    )
    b.add_argument("--eur-per-unit", type=float, help="conversion when the budget is not in EUR")
    sub.add_parser("env", help="environment variables the serving models and jobs read")
    return ap


def _drift(args: argparse.Namespace) -> int:
    from monitoring import drift, metrics, outputs, reference, windows
    from monitoring.environment import MONITORING_PUSHGATEWAY_URL

    # Cut last lines (a writer killed mid-batch) skipped by windows.load: named in drift.json and on stderr.
    ref_damaged: list[str] = []
    cur_damaged: list[str] = []
    if args.reference.endswith("manifest.json") or args.reference.endswith(".manifest.json"):
        if args.bundle is None:
            # `training train --output DIR` writes DIR/export/ beside DIR/manifest.json: the bundle it trained.
            beside = Path(args.reference).parent / "export"
            if outputs.is_url(args.reference):
                raise InputError(
                    "--reference is a manifest.json in object storage: also pass --bundle (the export bundle it "
                    "trained; the export/ beside a manifest is looked up only for a local path)"
                )
            if not (beside / "metadata.json").is_file():
                raise InputError(
                    "--reference is a manifest.json: also pass --bundle (the export bundle it trained; "
                    f"found none at {beside})"
                )
            args.bundle = beside
            print(
                f"drift: reference from {args.reference} with the bundle beside it, {beside}", file=sys.stderr
            )
        import pandas as pd

        ref = pd.DataFrame(reference.build(args.reference, args.bundle, encoding=args.data_encoding))
    else:
        ref = windows.load(args.reference, damaged=ref_damaged)
    if args.window and args.since:
        raise InputError("give --window (the window ending now) or --since, not both")
    if not outputs.is_url(args.out):  # named at once, not after the window is read
        outputs.local_dir(args.out)
    since = windows.window_start(args.window) if args.window else args.since
    cur = windows.load(args.current, since=since, until=args.until, damaged=cur_damaged)
    threshold = drift.DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    result = drift.compute(
        ref, cur, threshold=threshold, reference_source=args.reference, current_source=args.current
    )
    rep = result.report
    for side, damaged in (("reference", ref_damaged), ("current", cur_damaged)):
        rep[side] |= {"damaged_lines": len(damaged), "damaged": damaged[:DAMAGED_NAMED]}
        if damaged:
            print(f"monitoring drift: skipped {len(damaged)} cut last line(s) in the {side} records (a writer "
                  f"killed mid-write): {', '.join(damaged[:DAMAGED_NAMED])}", file=sys.stderr)  # fmt: skip
    if rep["current"]["excluded"]:
        print(f"monitoring drift: judged the {rep['current']['rows']} records of the reference's model; left out "
              f"those of others: {json.dumps(rep['current']['excluded'])}", file=sys.stderr)  # fmt: skip
    # The gauges are pushed before the report is uploaded: a bucket outage must not silence the alert. A
    # gateway outage must not lose the report either: it is uploaded, then the push error ends the job (exit 2).
    push_failed: metrics.PushError | None = None
    with outputs.staged(args.out) as out_dir:
        drift.write(result, out_dir)
        try:
            metrics.export(metrics.DRIFT_JOB, {"model": args.model},
                           metrics.drift_gauges(args.model, rep["score"], rep["threshold"], rep["drift_detected"]),
                           out_dir=out_dir, pushgateway=MONITORING_PUSHGATEWAY_URL.get())  # fmt: skip
        except metrics.PushError as exc:
            push_failed = exc
    drifted = [k for k, v in rep["features"].items() if v["drifted"]]
    print(f"drift {'DETECTED' if rep['drift_detected'] else 'not detected'}: score {rep['score']} "
          f"(threshold {rep['threshold']}), drifted: {', '.join(drifted) or 'none'}; "
          f"{outputs.joined(args.out, 'drift.html')}")  # fmt: skip
    if push_failed is not None:
        raise push_failed
    return 1 if args.fail_on_drift and rep["drift_detected"] else 0


def _reference(args: argparse.Namespace) -> int:
    from monitoring import reference
    from monitoring.outputs import local_file

    local_file(args.out)  # before minutes of inference, not after them
    records = reference.build(args.manifest, args.bundle, rows=args.rows, encoding=args.data_encoding)
    reference.write_jsonl(records, args.out)
    print(f"{len(records)} reference records -> {args.out}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from monitoring import evaluate, metrics
    from monitoring.environment import MONITORING_PUSHGATEWAY_URL
    from monitoring.outputs import local_dir, replacing

    local_dir(args.out)  # before the sample goes through the endpoint, not after it
    report = evaluate.run(args.url, args.manifest, args.bundle, rows=args.rows, encoding=args.data_encoding)
    with replacing(args.out / "quality.json") as tmp:  # a failed write keeps the last run's whole
        tmp.write_text(json.dumps(report, indent=2) + "\n")
    metrics.export(metrics.QUALITY_JOB, {"model": args.model},
                   metrics.quality_gauges(args.model, report["measured"], report["training"]),
                   out_dir=args.out, pushgateway=MONITORING_PUSHGATEWAY_URL.get())  # fmt: skip
    print(json.dumps({"measured": report["measured"], "training": report["training"]}))
    return 0


def _texts(args: argparse.Namespace) -> int:
    from monitoring import samples
    from monitoring.outputs import local_file, replacing

    local_file(args.out)
    if args.shifted:
        texts = samples.shifted_texts(args.rows, args.seed)
    elif args.manifest is None:
        raise InputError("give --manifest (clean window from the test split) or --shifted")
    else:
        texts = samples.clean_texts(args.manifest, args.rows, args.seed, encoding=args.data_encoding)
    with replacing(args.out) as tmp:  # a failed write keeps the previous window whole
        tmp.write_text("".join(" ".join(t.split()) + "\n" for t in texts))
    print(f"{len(texts)} texts -> {args.out}")
    return 0


def _budget(args: argparse.Namespace) -> int:
    from monitoring import budget, metrics
    from monitoring.environment import MONITORING_PUSHGATEWAY_URL
    from monitoring.outputs import local_dir

    # `not 0 < x < inf`, not `x <= 0`: NaN passed the latter and was pushed as the limit and forecast.
    if args.eur_per_unit is not None and not 0 < args.eur_per_unit < float("inf"):
        raise InputError(
            f"--eur-per-unit {args.eur_per_unit}: give EUR per unit of the budget's currency (a number > 0)"
        )
    if args.out is not None:
        local_dir(args.out)  # before the budget is read (GCP: before its notifications are drained)
    if args.cloud == "gcp":
        return _budget_gcp(args)
    if args.cloud == "azure":
        if not args.scope:
            raise InputError("--cloud azure needs --scope /subscriptions/<id>/resourceGroups/<rg>")
        found = budget.read_azure(args.scope, args.budget)
    else:
        found = budget.read_aws(args.budget, args.account_id)
    limit, forecast = found.in_eur(args.eur_per_unit)
    metrics.export(budget.BUDGET_JOB, {"stack": args.stack}, budget.gauges(args.stack, limit, forecast),
                   out_dir=args.out, pushgateway=MONITORING_PUSHGATEWAY_URL.get())  # fmt: skip
    print(
        json.dumps(
            {"stack": args.stack, "source": found.source, "limit_eur": limit, "forecast_eur": forecast}
        )
    )
    return 0


def _budget_gcp(args: argparse.Namespace) -> int:
    """Drain the budget's notifications; push the newest, then acknowledge (monitoring/budget_gcp.py)."""
    from monitoring import budget, budget_gcp, metrics
    from monitoring.environment import MONITORING_PUSHGATEWAY_URL

    if not args.subscription:
        raise InputError("--cloud gcp needs --subscription projects/<project>/subscriptions/<id>")
    subscription = budget_gcp.RestSubscription(args.subscription)
    drained = budget_gcp.drain(subscription)
    note = drained.of_budget(args.budget)
    others = sorted({n.display_name for n in drained.newest.values()} - {args.budget})
    summary: dict[str, object] = {
        "stack": args.stack,
        "source": args.subscription,
        "pushed": note is not None,
    }
    if note is None:
        print(f"monitoring budget: no new notification of budget {args.budget!r} on {args.subscription}"
              f"{f' (only of {others})' if others else ''}: nothing pushed, the Pushgateway keeps the last "
              "values (Cloud Billing publishes several times a day)", file=sys.stderr)  # fmt: skip
    else:
        limit, forecast = note.as_budget(args.subscription).in_eur(args.eur_per_unit)
        metrics.export(budget.BUDGET_JOB, {"stack": args.stack}, budget.gauges(args.stack, limit, forecast),
                       out_dir=args.out, pushgateway=MONITORING_PUSHGATEWAY_URL.get())  # fmt: skip
        summary |= {"limit_eur": limit, "forecast_eur": forecast, "published": note.published.isoformat(),
                    "cost": note.cost, "currency": note.currency,
                    "forecast_threshold_exceeded": note.forecast_threshold}  # fmt: skip
    # Only after the push: a failed push leaves the messages for the next run.
    subscription.acknowledge(drained.ack_ids)
    print(json.dumps(summary | {"acknowledged": len(drained.ack_ids), "ignored_budgets": others}))
    if drained.malformed:
        raise InputError(
            f"{len(drained.malformed)} message(s) on {args.subscription} are not budget notifications "
            f"(schema {budget_gcp.SCHEMA_VERSION}), left unacknowledged for inspection: "
            + "; ".join(drained.malformed[:5])
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "env":
            from monitoring.environment import ENVIRONMENT_VARIABLES

            for var in ENVIRONMENT_VARIABLES:
                print(f"{var.name} ({var.type.__name__}, default {var.default!r}): {var.doc}")
            return 0
        return {
            "drift": _drift,
            "reference": _reference,
            "evaluate": _evaluate,
            "texts": _texts,
            "budget": _budget,
        }[args.command](args)
    except InputError as exc:
        print(f"monitoring {args.command}: {exc}", file=sys.stderr)
        return 2
