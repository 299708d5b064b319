"""The pipeline's own step commands (``python -m pipeline step NAME``): thin glue over the existing parts.

Every decision here is written twice: a JSON with its reasons (``--out``) and, for a condition step, a flag
file holding "true" or "false" (``--flag-file``), which is what Argo reads as the step's output parameter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("pipeline")
EXIT_USAGE = 2


def _write(path: Path | None, doc: dict[str, Any]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def _flag(path: Path | None, value: bool) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("true" if value else "false", encoding="utf-8")


def _champion(store: str, model: str, env: str) -> dict[str, Any] | None:
    """The record of the model live in `env` (None before the first promotion)."""
    from promotion.errors import PromotionError
    from promotion.store import ModelStore

    try:
        current = ModelStore(store, model).champion(env)  # refuses a damaged record (`created` included)
    except PromotionError as exc:  # damaged, or written by a newer promotion: its message says the fix
        raise StoreUnreadable(f"the champion of {env} in {store}: {exc}", exit_code=EXIT_USAGE) from None
    except OSError as exc:  # fsspec's errors for a local path and the object stores' (down, denied) alike
        raise StoreUnreadable(
            f"cannot read the promotion store {store} ({type(exc).__name__}: {exc}): check --store (a folder or "
            "a bucket URI this machine can reach) and its credentials"
        ) from exc
    return None if current is None else current[1]


def champion_created(record: dict[str, Any]) -> dt.datetime:
    """When the champion's record was written (`created`, ISO 8601: ModelStore.champion refuses one that is not),
    which decide-retrain ages it by. A time without an offset is UTC, as monitoring reads one."""
    when = dt.datetime.fromisoformat(record["created"])
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


class StoreUnreadable(RuntimeError):
    """The step cannot read the champion from the promotion store: `python -m pipeline step` prints it and exits
    `exit_code`: 2 where `python -m promotion` refuses the same store (damaged, or a newer promotion's), 1 where
    the store does not answer."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def data_overrides(args: argparse.Namespace) -> list[str]:
    """The dataset's columns and class names as training overrides: data-check hashes the data `train` trains on,
    so its manifest is the one the candidate's metrics.json names."""
    from pipeline.dag import DATA_FIELDS

    return [f"{setting}={getattr(args, name)}" for name, setting in DATA_FIELDS.items()]


def data_check(args: argparse.Namespace) -> int:
    from training import data, presets
    from training.config import apply_overrides
    from training.errors import TrainingError

    try:
        config = apply_overrides(
            presets.get(args.preset), [f"data.source={args.data}", *data_overrides(args)]
        )
        sha = data.load(config.data).manifest["sha256"]
    except TrainingError as exc:  # a column or class the data lacks: the message names the parameter to set
        print(
            f"error: {exc} (pipeline parameters --data, --labels, --text-column, --label-column)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    champion = _champion(args.store, args.model, args.env)
    previous = None if champion is None else champion["lineage"].get("dataset_manifest_sha256")
    doc = {"manifest_sha256": sha, "champion_manifest_sha256": previous, "changed": previous != sha}
    _write(args.out, doc)
    print(
        f"data manifest {sha[:12]} vs champion's {str(previous)[:12]}: {'changed' if doc['changed'] else 'same'}"
    )
    return 0


def decide_retrain(args: argparse.Namespace) -> int:
    work = Path(args.work)
    reasons: list[str] = []
    drift_file = work / "drift" / "drift.json"
    drift = json.loads(drift_file.read_text(encoding="utf-8"))  # the drift step succeeded: it wrote this
    if drift.get("drift_detected"):
        reasons.append(f"drift detected (score {drift.get('score')} over threshold {drift.get('threshold')})")
    data_doc = json.loads((work / "decisions" / "data-check.json").read_text(encoding="utf-8"))
    if data_doc["changed"]:
        reasons.append("the data manifest changed since the champion was trained")
    champion = _champion(args.store, args.model, args.env)
    if champion is None:
        reasons.append(f"no champion in {args.env} yet")
    else:
        created = champion_created(champion)
        age = (dt.datetime.now(dt.UTC) - created).total_seconds() / 86400
        if age > float(args.max_model_age_days):
            reasons.append(
                f"the champion is {age:.1f} days old (schedule: retrain after {args.max_model_age_days})"
            )
    if args.force == "true":
        reasons.append("forced (--force)")
    retrain = bool(reasons)
    why = reasons or ["no drift, same data, champion within its age limit, not forced"]
    doc = {
        "retrain": retrain,
        "reasons": why,
        "drift": {k: drift.get(k) for k in ("drift_detected", "score", "threshold")},
    }
    _write(work / "decisions" / "decide-retrain.json", doc)
    _flag(args.flag_file, retrain)
    print(f"retrain: {str(retrain).lower()} ({'; '.join(why)})")
    return 0


TUNE_WORKER = "pipeline"
"""The tune study's worker id in the pipeline: stable across Argo retries of the step (see train)."""


def _in_pod() -> bool:
    """The kubelet sets KUBERNETES_SERVICE_HOST in every container it starts: this step runs in a pod (an Argo step,
    also one submitted with local=true), whose disk and work volume go with it."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _file_store(uri: str) -> bool:
    """An MLflow store that is a file of this machine: `file:`, `sqlite:` or a bare path (not a server, not a
    database elsewhere)."""
    scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
    return scheme in ("", "file", "sqlite")


def _warn_mlflow_in_pod(what: str, uri: str) -> None:
    """A warning, not an error: a team without an MLflow server still retrains and promotes (the records and the
    history in the store are durable); it only loses MLflow's view, and says so in the step's log."""
    from training.launch_config import DEFAULT_NAMESPACE, MLFLOW_SECRET

    print(
        f"warning: MLflow {what} is {uri}, a file inside this pod: it is lost with the pod. To keep it, point the "
        f"platform at your MLflow server: kubectl -n {DEFAULT_NAMESPACE} create secret generic {MLFLOW_SECRET} "
        "--from-literal=MLFLOW_TRACKING_URI=https://... --from-literal=MLFLOW_TRACKING_TOKEN=... "
        "(pipeline/README.md)",
        file=sys.stderr,
    )


def train(args: argparse.Namespace) -> int:
    # SIGTERM before the loop takes over exits 75 (Argo retries 75): pipeline/__main__.py installs that first.
    from training import environment as training_env
    from training.cli import main as training_main

    try:
        tracked, uri = bool(training_env.TRAINING_MLFLOW.get()), training_env.MLFLOW_TRACKING_URI.get()
    except ValueError:  # a bad value: the trainer itself refuses it at start, with exit 2
        tracked, uri = False, None
    if tracked and _in_pod() and (not uri or _file_store(uri)):
        _warn_mlflow_in_pod("tracking (the run's params, metrics, artifacts)", uri or f"{args.out}/mlruns")

    if args.mode == "tune":
        argv = [
            "tune",
            "--preset",
            args.preset,
            "--trials",
            args.trials,
            "--trial-timeout",
            args.trial_timeout,
        ]
        # One fixed worker id: the study (OUT/study.db) lives on the workflow's own volume and has one worker, so
        # an Argo retry (a new pod, a new host name) finds its RUNNING trial and resumes it from its checkpoints.
        argv += ["--worker", TUNE_WORKER]
        # Trials skip the baselines for speed; the candidate must carry them for the evaluate step's gate.
        argv += ["--output", args.out, f"data.source={args.data}", *data_overrides(args), "baselines=true"]
    else:
        # Export is a step of its own (after the candidate wins), so the run does not export.
        argv = ["train", "--preset", args.preset, "--output", args.out, "--data", args.data,
                *data_overrides(args), "export=false"]  # fmt: skip
    return training_main(argv)


def evaluate(args: argparse.Namespace) -> int:
    from promotion import classes, gates, rescore
    from promotion.config import load_config

    config = load_config(None)
    champion = _champion(args.store, args.model, args.env)
    # Here the data is readable: when the candidate's data differ from the champion's, the champion's bundle is
    # scored on the candidate's test rows and kept in its metrics.json (published with it), for promotion's gate.
    try:
        rescored = rescore.for_candidate(args.candidate, champion=champion, environment=args.env)
    except rescore.RescoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if rescored is not None:
        shown = ", ".join(f"{k} {v:.4f}" for k, v in rescored["metrics"].items() if v is not None)
        print(f"champion rescored on the candidate's {rescored['rows']} test rows: {shown}")
    metrics = json.loads((Path(args.candidate) / "metrics.json").read_text(encoding="utf-8"))
    manifest_file = Path(args.candidate) / "manifest.json"
    manifest = json.loads(manifest_file.read_text(encoding="utf-8")) if manifest_file.is_file() else None
    best = rescore.versus(
        metrics, champion, fix=rescore.fix_command(args.candidate, args.env, args.store, args.model)
    )
    results = [
        gates.beats_baseline(metrics, config.gates),
        gates.not_worse_than_champion(
            metrics,
            best.metrics,
            config.gates,
            environment=args.env,
            classes=classes.of_manifest(manifest),
            champion_classes=classes.of_record(champion),
            basis=best.basis,
            incomparable=best.incomparable,
        ),  # fmt: skip
    ]
    wins = all(r.passed for r in results)
    doc = {"wins": wins, "gates": [r.as_dict() for r in results], rescore.KEY: rescored}
    _write(args.out, doc)
    _flag(args.flag_file, wins)
    for r in results:
        print(f"{r.name}: {r.status} ({r.detail})")
    print(f"candidate wins: {str(wins).lower()}")
    return 0


# What CI needs of a candidate (main.yml builds the serving image from export/, promotion reads the rest);
# the weights in model/ and the checkpoints stay behind.
PUBLISHED = ("metrics.json", "manifest.json", "cost.json", "export")


def publish_candidate(candidate: Path, store: str, model: str) -> str:
    """Copy the candidate to ``<store>/<model>/candidates/<bundle sha256[:16]>`` and return that URI.

    On the cluster WORK is the workflow's own volume, deleted with the workflow: without this copy the
    retrained model CI must build an image for would be gone before anyone could point CI at it.
    Content-addressed by the bundle, so a rerun writes the same place."""
    from pipeline.images import bundle_sha256
    from promotion.evidence import join, write_bytes

    uri = join(store, model, "candidates", bundle_sha256(candidate / "export")[:16])
    for name in PUBLISHED:
        path = candidate / name
        files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
        for f in files:
            if f.is_file():
                write_bytes(join(uri, f.relative_to(candidate).as_posix()), f.read_bytes())
    return uri


def images(args: argparse.Namespace) -> int:
    """Resolve the CI-built images by digest (pipeline/images.py); flag: they carry this candidate's bundle."""
    from pipeline import images as resolver

    work = Path(args.work)
    doc: dict[str, Any]
    if args.local == "true":
        doc = {
            "ready": True,
            "reasons": ["local run: no registry; promotion runs with --local-run --no-images"],
        }
    else:
        published = None
        if args.store and args.model:
            published = publish_candidate(work / "candidate", args.store, args.model)
            print(f"candidate published to {published}")
        try:
            ready, doc, record = resolver.check(
                args.training_image, args.serving_image, work / "candidate" / "export"
            )
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except resolver.RegistryError as exc:
            print(f"error: the registry could not confirm the images: {exc}", file=sys.stderr)
            return 1
        doc["candidate_uri"] = published
        if not ready and published:
            doc["reasons"].append(
                f"the candidate is kept at {published}: set the repository variable CANDIDATE_URI to it and run "
                ".github/workflows/main.yml, which builds, signs and pushes its serving image and promotes it to dev"
            )
        _write(work / "candidate" / "build-record.json", record)
    _write(work / "decisions" / "images.json", doc)
    _flag(args.flag_file, doc["ready"])
    print(f"images ready: {str(doc['ready']).lower()} ({'; '.join(doc['reasons'])})")
    return 0


def _data_args(p: argparse.ArgumentParser) -> None:
    from pipeline.dag import Params

    # The DAG always passes them; the defaults (training's own) keep a hand-typed step command short.
    defaults = Params()
    p.add_argument("--labels", default=defaults.labels, help="class names in class-id order, comma-separated")
    p.add_argument("--text-column", default=defaults.text_column)
    p.add_argument("--label-column", default=defaults.label_column)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("step", help="run one of the pipeline's own steps (the DAG calls these)")
    steps = p.add_subparsers(dest="step", required=True)
    s = steps.add_parser("data-check")
    for a in ("--data", "--preset", "--store", "--model", "--env"):
        s.add_argument(a, required=True)
    _data_args(s)
    s.add_argument("--out", type=Path, required=True)
    s.set_defaults(func=data_check)
    s = steps.add_parser("decide-retrain")
    for a in ("--work", "--store", "--model", "--env", "--max-model-age-days"):
        s.add_argument(a, required=True)
    s.add_argument("--force", choices=("true", "false"), default="false")
    s.add_argument("--flag-file", type=Path, default=None)
    s.set_defaults(func=decide_retrain)
    s = steps.add_parser("train")
    s.add_argument("--mode", choices=("train", "tune"), default="train")
    for a in ("--preset", "--data", "--trials", "--trial-timeout", "--out"):
        s.add_argument(a, required=True)
    _data_args(s)
    s.set_defaults(func=train)
    s = steps.add_parser("evaluate")
    for a in ("--candidate", "--store", "--model", "--env"):
        s.add_argument(a, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--flag-file", type=Path, default=None)
    s.set_defaults(func=evaluate)
    s = steps.add_parser(
        "images", help="publish the candidate, resolve the CI-built images by digest (never builds)"
    )
    for a in ("--work", "--training-image", "--serving-image"):
        s.add_argument(a, required=True)
    s.add_argument(
        "--store", default=None, help="publish the candidate to STORE/MODEL/candidates/ (the DAG passes it)"
    )
    s.add_argument("--model", default=None)
    s.add_argument("--local", choices=("true", "false"), default="true")
    s.add_argument("--flag-file", type=Path, default=None)
    s.set_defaults(func=images)
    s = steps.add_parser("promote")
    for a in ("--candidate", "--store", "--model", "--env"):
        s.add_argument(a, required=True)
    s.add_argument("--local", choices=("true", "false"), default="true")
    s.add_argument("--loadtest", default="")
    s.add_argument(
        "--drift-reference",
        default="",
        help="where drift-check reads its reference: the promoted run's goes there",
    )
    s.add_argument("--out", type=Path, default=None)
    from pipeline.promote_step import promote  # it uses this module's helpers

    s.set_defaults(func=promote)
