"""`python -m training launch --tune`: an Indexed Job of W tuning workers sharing one Optuna study.

    python -m training launch --tune --workers 4 --trials 40 --trial-timeout 1800 --budget-eur 50 \\
        --preset gpu --image REGISTRY/training@sha256:... --checkpoint-uri s3://BUCKET/tune/sentiment

Each pod runs `python -m training tune` (training/tune.py) on the spot GPU pool. The study storage is an RDB
URL read from a Secret (`--storage-secret`, key `url`) into TRAINING_TUNE_STORAGE, so it never appears in the
manifest: `postgresql://` (psycopg 3) or `mysql+pymysql://` (PyMySQL), the drivers the image ships
(training/tune_storage.py). The worker id is the pod's completion index (JOB_COMPLETION_INDEX, set by the Job
controller). A preempted pod exits 75; the podFailurePolicy replaces it without counting a failure, and the
replacement has the same index, so it resumes that worker's RUNNING trial from the trial's checkpoints in the
bucket. Two workers never run the same trial: Optuna numbers each new trial inside a storage transaction.
Every worker logs its trials and the study's parent run to the MLflow server of the optional Secret `mlflow`
(the training Job's envFrom, kept here; --mlflow-secret), else to files in its pod, lost with it.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from typing import Any

from training.errors import ConfigError
from training.tune_storage import STORAGE_ENV

DEFAULT_SECRET = "optuna-storage"


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("hyperparameter search (--tune)")
    g.add_argument(
        "--tune", action="store_true", help="render tuning workers (training tune) instead of one run"
    )
    g.add_argument("--workers", type=int, default=2, help="parallel tuning pods (default %(default)s)")
    g.add_argument("--trials", type=int, default=20, help="trials in the study (default %(default)s)")
    g.add_argument(
        "--trial-timeout", type=float, default=1800, help="seconds per trial (default %(default)s)"
    )
    g.add_argument("--budget-eur", type=float, default=None, help="stop the study at this spend")
    g.add_argument("--sampler", default="tpe", choices=("tpe", "grid", "random"))
    g.add_argument("--pruner", default="median", choices=("median", "halving", "none"))
    g.add_argument("--study-name", default=None, help="default <model>-<preset>")
    g.add_argument(
        "--storage-secret",
        default=DEFAULT_SECRET,
        help="Secret whose key `url` is the study's RDB URL (default %(default)s)",
    )


def tune_command(cfg: Any, args: argparse.Namespace) -> list[str]:
    cmd = ["python", "-m", "training", "tune", "--preset", cfg.preset, "--trials", str(args.trials)]
    cmd += ["--trial-timeout", str(args.trial_timeout), "--sampler", args.sampler, "--pruner", args.pruner]
    # One prefix per Job: a study launched under another Job name gets fresh trial folders (the study refuses a
    # prefix holding trials it does not have), and a relaunch of the same Job resumes its own.
    cmd += [
        "--output",
        cfg.output_dir,
        "--checkpoint-uri",
        f"{cfg.checkpoint_uri.rstrip('/')}/tune/{cfg.name}",
    ]
    if args.budget_eur is not None:
        cmd += ["--budget-eur", str(args.budget_eur)]
    if args.study_name:
        cmd += ["--study-name", args.study_name]
    return [*cmd, *cfg.overrides]


def render_tune(cfg: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The training Job (training/launch.py) turned into W independent tuning workers."""
    from training.launch import render_job

    if args.workers < 1:
        raise ConfigError("workers", f"must be >= 1, got {args.workers}")
    if args.trials < args.workers:
        raise ConfigError("trials", f"{args.trials} trials cannot keep {args.workers} workers busy")
    if cfg.nodes != 1:
        raise ConfigError("nodes", "a tuning worker is one pod; use --workers for parallel trials")
    if cfg.name == "sentiment-train":  # the launch default: a study is not that run
        cfg = dataclasses.replace(cfg, name="sentiment-tune")
    job = copy.deepcopy(render_job(cfg))
    spec = job["spec"]
    spec["completions"] = spec["parallelism"] = args.workers
    pod = spec["template"]["spec"]
    pod.pop("subdomain", None)  # no rendezvous between tuning workers
    container = pod["containers"][0]
    container["command"] = tune_command(cfg, args)
    container.pop("ports", None)
    container["env"] = [e for e in container["env"] if e["name"] != "TRAINING_NODES"] + [
        {"name": STORAGE_ENV, "valueFrom": {"secretKeyRef": {"name": args.storage_secret, "key": "url"}}}
    ]
    for obj in (job, spec["template"]):
        obj["metadata"].setdefault("labels", {})["platform.eu-ml/role"] = "tune"
    return [job]
