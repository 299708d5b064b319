"""Promotion gates, records, MLflow registry aliases and rollback.

    python -m promotion evaluate --env dev --candidate runs/demo/train --loadtest reports/serve/loadtest.json
    python -m promotion promote  --env dev --candidate runs/demo/train --loadtest ... [--local-run]
    python -m promotion promote  --env prod --candidate s3://bucket/runs/42 --approval approval.json --requested-by alice
    python -m promotion rollback --env prod --reason "p99 regression in production"
    python -m promotion history  --env dev
    python -m promotion approval --env prod --github-reviews approvals.json --out approval.json
    python -m promotion unlock   --env prod --lock-id ID   (after a promotion was killed outright)
    python -m promotion rescore  --env dev --candidate runs/demo/train   (its data differ from the champion's)
    python -m promotion reference --env dev --drift-reference s3://MODELS/reference/   (what dev serves now)

Exit status: 0 promoted (or would be, for evaluate) / rolled back; 1 a gate rejected the
candidate (the record says why); 2 the command could not run (bad input or config).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from promotion.cli_input import approval_command, check_args
from promotion.config import load_config
from promotion.drift_reference import shown
from promotion.errors import PromotionError, Terminated
from promotion.evidence import load_evidence
from promotion.lock import lock_uri, release
from promotion.stackconfig import check_stack_config, update_stack_config
from promotion.store import ModelStore, default_store, replay, to_json


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", required=True, help="target environment (a table in the gate config)")
    p.add_argument(
        "--store", default=default_store(), help="model store root, local or s3://... (env PROMOTION_STORE)"
    )
    p.add_argument("--model-name", default="sentiment", help="registered model name")
    p.add_argument(
        "--registry-uri",
        default=None,
        help="MLflow registry URI (default MLFLOW_REGISTRY_URI or local sqlite)",
    )
    p.add_argument("--config", default=None, help="gate config TOML (default promotion/gates.toml)")
    p.add_argument(
        "--requested-by", default=None, help="who asks for the promotion (an approver must differ)"
    )
    p.add_argument(
        "--deploy-out",
        type=Path,
        default=None,
        help="write what to deploy (stack, version, image digest) here",
    )
    p.add_argument(
        "--stack-config",
        type=Path,
        default=None,
        help="also set serving.image in this Pulumi.<stack>.yaml to the deployed digest (GitOps)",
    )


def _store_args(p: argparse.ArgumentParser) -> None:
    """The environment and the store, for the commands that neither judge nor record a candidate."""
    p.add_argument("--env", required=True)
    p.add_argument("--store", default=default_store(), help="model store root (env PROMOTION_STORE)")
    p.add_argument("--model-name", default="sentiment", help="registered model name")
    p.add_argument(
        "--config", default=None, help="gate config TOML naming the environments (default gates.toml)"
    )


def _drift_reference(p: argparse.ArgumentParser, *, rerun: bool = False) -> None:
    where = (
        "the prefix the environment's drift job reads (stack: its models bucket's reference/, "
        "s3://<models>/reference/) or a .jsonl file"
    )
    p.add_argument(
        "--drift-reference",
        required=rerun,
        default=None,
        help=f"where to write the drift reference of the version the environment serves now: {where}"
        if rerun
        else f"once done, write the served run's drift reference here: {where}",
    )


def _candidate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--candidate", required=True, help="training output folder or URI (metrics.json, export/...)"
    )
    p.add_argument("--bundle", default=None, help="export bundle (default CANDIDATE/export)")
    p.add_argument("--loadtest", default=None, help="`python -m serving loadtest --out` JSON")
    p.add_argument(
        "--policy-report", default=None, help="policy report (default reports/policy/<stack>.json)"
    )
    p.add_argument(
        "--build-record", default="reports/images/build-record.json", help="`make images` build record"
    )
    p.add_argument(
        "--no-images",
        action="store_true",
        help="no image was built for this candidate: ignore any build record (e.g. `make demo`)",
    )
    p.add_argument(
        "--approval", default=None, help="approval JSON {approver, approved_at, environment, reference}"
    )
    p.add_argument(
        "--local-run",
        action="store_true",
        help="a local run with no image registry (only where the environment allows it; never deployable)",
    )
    p.add_argument("--out", type=Path, default=None, help="also write the record here")
    p.add_argument(
        "--deploy-command",
        default=None,
        help="promote: deploys $PROMOTION_IMAGE to $PROMOTION_STACK (e.g. a script running `pulumi up`)",
    )
    p.add_argument(
        "--post-deploy-loadtest",
        type=Path,
        default=None,
        help="promote: the load test the smoke command writes ($PROMOTION_LOADTEST_OUT); stored with the record",
    )
    p.add_argument(
        "--smoke-command",
        default=None,
        help="promote: post-deploy check of the live endpoint; the alias moves only after it passes",
    )


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m promotion", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    for name, help_ in (
        ("evaluate", "judge a candidate (dry run: nothing stored)"),
        ("promote", "judge, record, register, move the alias"),
    ):
        p = sub.add_parser(name, help=help_)
        _common(p)
        _candidate_args(p)
        if name == "promote":
            _drift_reference(p)
    p = sub.add_parser("rollback", help="point the environment back to the previously promoted version")
    _common(p)
    p.add_argument("--reason", required=True, help="why (kept in the rollback record)")
    _drift_reference(p)
    p = sub.add_parser(
        "reference", help="write the drift reference of the version the environment serves now (a rerun)"
    )
    _store_args(p)
    _drift_reference(p, rerun=True)
    p = sub.add_parser("history", help="list the environment's promotions and rollbacks")
    _common(p)
    p = sub.add_parser(
        "unlock", help="remove the lock a killed promotion or rollback left (its id is required)"
    )
    _store_args(p)
    p.add_argument("--lock-id", required=True, help="the id the refused run printed (guards a newer lock)")
    p = sub.add_parser(
        "rescore",
        help="score the champion's bundle on the candidate's test split (when their data differ), into the "
        "candidate's metrics.json: what not-worse-than-champion compares",
    )
    _store_args(p)
    p.add_argument(
        "--candidate", required=True, help="training output folder or URI (metrics.json, manifest.json)"
    )
    p = sub.add_parser("approval", help="approval record from GitHub's environment reviews of a run (JSON)")
    p.add_argument("--env", required=True)
    p.add_argument(
        "--github-reviews", type=Path, required=True, help="`gh api .../actions/runs/ID/approvals` output"
    )
    p.add_argument("--reference", default="", help="link to the run, kept in the record")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--config", default=None, help="gate config TOML naming the environments (default gates.toml)"
    )
    return ap


def _rescore(args: argparse.Namespace, store: ModelStore) -> int:
    from promotion.rescore import for_candidate

    current = store.champion(args.env)
    done = for_candidate(args.candidate, champion=current[1] if current else None, environment=args.env)
    if done is None:
        print(
            f"nothing to rescore: {args.env} has no champion, or it was trained on the candidate's data or classes"
        )
    else:
        shown = ", ".join(f"{k} {v:.4f}" for k, v in done["metrics"].items() if v is not None)
        print(
            f"champion record {done['champion']['record_id']} on the candidate's {done['rows']} test rows: {shown} "
            f"(written to {args.candidate}/metrics.json as champion_rescored)"
        )
    return 0


def _print_record(record: dict) -> None:
    width = max(len(g["name"]) for g in record["gates"]) if record["gates"] else 10
    for g in record["gates"]:
        mark = {"pass": "PASS", "fail": "FAIL", "not_applicable": "n/a "}[g["status"]]
        print(f"  {mark}  {g['name']:<{width}}  {g['detail']}")
    version = record["model"]["version"]
    print(
        f"{record['decision'].upper()}: {record['model']['name']}"
        + (f" version {version}" if version else "")
        + f" -> {record['environment']} (record {record['record_id']})"
    )


def main(argv: list[str] | None = None) -> int:
    from promotion import promote as ops
    from promotion import rollback as rollback_ops
    from promotion.deploy import CommandDeployer
    from promotion.registry import Registry

    args = parser().parse_args(argv)
    try:
        check_args(args)
        if args.command == "approval":
            return approval_command(args)
        store = ModelStore(args.store, args.model_name)
        if args.command == "unlock":
            uri = lock_uri(store.root, store.model, args.env)
            print(f"{uri}: removed" if release(uri, args.lock_id) else f"{uri}: no lock (nothing to do)")
            return 0
        if args.command == "rescore":
            return _rescore(args, store)
        if args.command == "reference":
            from promotion.drift_reference import command

            return command(args.env, args.drift_reference, store)
        if args.command == "history":
            # One read: the line saying what is served is derived from the events printed above it, even while
            # a promotion appends to the history.
            events = store.events(args.env)
            for event in events:
                print(to_json(event).strip())
            live = replay(events)
            print(f"{args.env} serves: {live[-1].version if live else 'nothing'}")
            return 0
        if args.command == "rollback":
            if args.stack_config:
                check_stack_config(args.stack_config, load_config(args.config).environment(args.env).stack)
            outcome = rollback_ops.rollback(
                args.env,
                store=store,
                registry=Registry(args.registry_uri),
                reason=args.reason,
                requested_by=args.requested_by,
                needs_image=args.stack_config is not None,
                drift_reference_to=args.drift_reference,
            )
            print(outcome.record["reasons"][0])
        else:
            config = load_config(args.config)
            env = config.environment(args.env)
            if args.stack_config and args.command == "promote":
                check_stack_config(args.stack_config, env.stack)
            evidence = load_evidence(
                args.candidate,
                bundle=args.bundle,
                loadtest=args.loadtest,
                policy_report=args.policy_report or f"reports/policy/{env.stack}.json",
                build_record=None if args.no_images else args.build_record,
                approval=args.approval,
            )
            if args.command == "evaluate":
                record = ops.evaluate(
                    evidence,
                    config,
                    args.env,
                    store=store,
                    local_run=args.local_run,
                    requested_by=args.requested_by,
                )
                outcome = ops.Outcome(record, None, None)
            else:
                deployer = None
                if args.deploy_command or args.smoke_command:
                    if not (args.deploy_command and args.smoke_command):
                        raise PromotionError("--deploy-command and --smoke-command go together")
                    deployer = CommandDeployer(
                        stack=env.stack,
                        environment=env.name,
                        deploy_command=args.deploy_command,
                        smoke_command=args.smoke_command,
                        post_deploy_loadtest=args.post_deploy_loadtest,
                    )
                outcome = ops.promote(
                    evidence,
                    config,
                    args.env,
                    store=store,
                    registry=Registry(args.registry_uri),
                    deployer=deployer,
                    local_run=args.local_run,
                    requested_by=args.requested_by,
                    drift_reference_to=args.drift_reference,
                )
            _print_record(outcome.record)
            if args.out:
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(to_json(outcome.record))
        if outcome.record_uri:
            print(f"record: {outcome.record_uri}")
        if args.deploy_out and outcome.deploy:
            args.deploy_out.parent.mkdir(parents=True, exist_ok=True)
            args.deploy_out.write_text(to_json(outcome.deploy))
        if args.stack_config and outcome.deploy:
            image = outcome.deploy["serving_image"]
            if not outcome.deploy["deployable"] or not image:
                raise PromotionError(
                    f"{args.env} has no deployable serving image digest: {args.stack_config} unchanged"
                )
            changed = update_stack_config(args.stack_config, image)
            print(f"{args.stack_config}: serving.image = {image}" + ("" if changed else " (unchanged)"))
        if outcome.unfinished:  # done, and said so above; what is left undone is exit 2 with its command
            print(f"promotion: {outcome.unfinished}", file=sys.stderr)
            return 2
        if outcome.drift_reference:
            print(shown(outcome.drift_reference))
        return 0 if outcome.record["decision"] in ("promote", "rollback") else 1  # deploy_failed: 1
    except PromotionError as exc:
        print(f"promotion: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        # fsspec's errors for a local store and the object stores' (unreachable, denied, read-only) alike. It was a
        # traceback with exit 1, which the workflows and the pipeline's promote step read as a gate's rejection.
        # Named by the file the error names where it has one: an OSError is not always the store's.
        where = getattr(exc, "filename", None) or getattr(args, "store", None)
        print(
            f"promotion: {type(exc).__name__}: {exc}: check that {where} can be reached and written from this "
            "machine (--store: a folder or bucket, and its credentials). What was done before it is printed above",
            file=sys.stderr,
        )
        return 2


def _terminated(signum: int, frame: FrameType | None) -> None:
    # Once: a second SIGTERM must not cut the clean-up short (the lock's removal); SIGKILL still ends it all.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


def cli(argv: list[str] | None = None) -> int:
    """`main` as `python -m promotion` runs it, and as the pipeline's promote step runs it in its own process: SIGTERM
    stops the deploy, removes the lock, then ends the process by that same signal (143 in a shell, -15 from Popen),
    so callers see what they saw before. Outside the main thread (where Python lets no handler be set) it is `main`."""
    if threading.current_thread() is not threading.main_thread():
        return main(argv)
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        rc = main(argv)
    except Terminated:
        print(
            "promotion: terminated (SIGTERM); its command was stopped and its lock removed. If it had started "
            "deploying, its `deploy_interrupted` record (named above) says what ran and how to check the stack",
            file=sys.stderr,
        )
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return 143  # not reached: the signal ends the process
    except BaseException:
        signal.signal(signal.SIGTERM, previous)
        raise
    signal.signal(signal.SIGTERM, previous)
    return rc


if __name__ == "__main__":
    sys.exit(cli())
