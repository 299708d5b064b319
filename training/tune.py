"""Hyperparameter search: ``python -m training tune`` (Optuna), each trial a normal training run.

    python -m training tune --preset smoke --trials 8 --trial-timeout 60 --output runs/tune
    python -m training tune --preset gpu --trials 40 --trial-timeout 1800 --budget-eur 50 \\
        --storage postgresql://... --worker 3 --checkpoint-uri s3://BUCKET/tune/sentiment --output /out

- The search space is data (training/search_space.json, per preset); a trial is the preset plus the
  space's fixed overrides plus the sampled ``key=value`` overrides, run by the trainer in this process
  into ``DIR/trials/<number>/`` (checkpoints, metrics.json, cost.json, MLflow run as a child of the study's).
- The trainer reports each validation to the trial (the best so far of the preset's pruning metric,
  search_space.json: validation AUC on smoke, which moves from the first validation while accuracy sits at
  the majority class); the pruner (median or successive halving, arguments per preset) ends weak trials
  there. The per-trial time limit is a deadline the training loop honours: the trial ends cleanly
  at its limit, checkpointed, and is recorded as TIME_LIMIT.
- The study stops when ``--trials`` trials exist in the study (all workers together) or when the spent
  cost (training/prices.json, as cost.json, converted to EUR) reaches ``--budget-eur``; a trial's deadline
  is also cut where the remaining budget runs out.
- Preemption: SIGTERM ends the running trial with a checkpoint and the command exits 75. The trial stays
  RUNNING in the study storage, tagged with this worker's id; the rerun (same ``--worker``) resumes that
  same trial (same number, same parameters, from its checkpoint) before asking for a new one. The same
  holds for exit 69 (object storage down after the retries): the store failed, not the trial.
- Concurrency: workers share the storage (SQLite locally, an RDB URL on the cluster); Optuna hands each
  ``ask()`` a new trial number inside a storage transaction, so two workers never run the same trial.

Writes ``DIR/study.json`` (training/README.md, "Hyperparameter search"), ``DIR/plots/*.png``, and a copy of
the best trial's ``model/``, ``metrics.json`` and ``cost.json`` into DIR, so export and promotion take the
study's output exactly like a single training run's.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.errors import EXIT_OK, EXIT_PREEMPTED, ConfigError, StorageUnavailable
from training.tracking import Outage
from training.tune_storage import check_storage_url, open_storage

log = logging.getLogger("training.tune")

METRIC = "val_accuracy"
SAMPLERS = ("tpe", "grid", "random")
PRUNERS = ("median", "halving", "none")  # their arguments and the metric they judge: search_space.json
# Trial user attributes (the study storage is the only state shared between workers and reruns).
WORKER, ELAPSED, PRUNED_AT, STOPPED, COST_EUR = "worker", "elapsed_s", "pruned_at_step", "stopped", "cost_eur"


@dataclass(kw_only=True, frozen=True, slots=True)
class TuneConfig:
    preset: str
    output: Path
    trials: int
    """Trials in the study, all workers together."""
    trial_timeout_s: float
    """Wall-clock limit per trial (all its attempts together)."""
    budget_eur: float | None = None
    sampler: str = "tpe"
    pruner: str = "median"
    storage: str | None = None
    """Optuna storage URL; None: sqlite:///DIR/study.db."""
    study_name: str | None = None
    worker: str | None = None
    """Worker id (the Indexed Job's completion index); None: $JOB_COMPLETION_INDEX or the host name."""
    seed: int = 0
    checkpoint_uri: str | None = None
    """Prefix for the trials' checkpoints (trial-<number>/ below it); None: DIR/trials/<number>/checkpoints."""
    overrides: tuple[str, ...] = ()
    space_file: Path | None = None

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise ConfigError("--trials", f"must be >= 1, got {self.trials}")
        if self.trial_timeout_s <= 0:
            raise ConfigError("--trial-timeout", f"must be > 0 seconds, got {self.trial_timeout_s}")
        if self.budget_eur is not None and self.budget_eur <= 0:
            raise ConfigError("--budget-eur", f"must be > 0, got {self.budget_eur}")
        if self.sampler not in SAMPLERS:
            raise ConfigError("--sampler", f"must be one of {', '.join(SAMPLERS)}, got {self.sampler!r}")
        if self.pruner not in PRUNERS:
            raise ConfigError("--pruner", f"must be one of {', '.join(PRUNERS)}, got {self.pruner!r}")
        if self.storage is not None:  # a driver the image lacks failed each worker at its first storage call
            check_storage_url(self.storage)

    @property
    def storage_url(self) -> str:
        return self.storage or f"sqlite:///{(self.output / 'study.db').resolve()}"

    @property
    def worker_id(self) -> str:
        return self.worker or os.environ.get("JOB_COMPLETION_INDEX") or socket.gethostname()


class _StopFlag:
    """SIGTERM/SIGINT between trials (the trainer handles them during a trial): finish, then exit 75."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def __call__(self, signum: int, frame: object) -> None:
        self.reason = signal.Signals(signum).name


def open_study(cfg: TuneConfig, space: Any, base_name: str) -> Any:
    import optuna

    from training import tune_sampler

    cfg.output.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(
        study_name=cfg.study_name or f"{base_name}-{cfg.preset}",
        storage=open_storage(cfg.storage_url),
        pruner=space.pruning.build(cfg.pruner),
        direction="maximize",
        load_if_exists=True,
    )
    worker = cfg.worker_id
    first = worker == "0" or (cfg.worker is None and not os.environ.get("JOB_COMPLETION_INDEX"))
    seed = tune_sampler.sampler_seed(cfg.seed, worker, first, len(study.get_trials(deepcopy=False)))
    study.sampler = tune_sampler.build(
        cfg.sampler, seed, space.grid() if cfg.sampler == "grid" else None, cfg.trials
    )
    return study


def spent_eur(study: Any) -> float:
    return sum(float(t.user_attrs.get(COST_EUR) or 0.0) for t in study.get_trials(deepcopy=False))


def _orphan(study: Any, worker: str) -> Any:
    """This worker's trial left RUNNING by a preempted attempt: resumed as the same trial."""
    import optuna
    from optuna.trial import TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if t.user_attrs.get(WORKER) == worker:
            return optuna.trial.Trial(study, t._trial_id)
    return None


def _price_eur_per_s(config: Any, eur_per_usd: float) -> tuple[float | None, float]:
    """The trial's compute price (spot: tuning runs on the spot pool) per second in EUR, and the rate used."""
    from training import cost
    from training import environment as env

    table = cost.load_prices()
    rate = 1.0 if table["currency"] == "EUR" else eur_per_usd
    entry = (
        table["instances"]
        .get(env.TRAINING_CLOUD.get() or config.cloud, {})
        .get(env.TRAINING_REGION.get() or config.region, {})
        .get(env.TRAINING_INSTANCE_TYPE.get() or config.instance_type)
    )
    return (None if entry is None else entry["spot"] * rate / 3600.0), rate


def _trial_cost_eur(out: Path, rate: float) -> float | None:
    """From the trial's own cost.json (all attempts' wall time, same price table), in EUR."""
    import json

    try:
        record = json.loads((out / "cost.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    total = record.get("total")
    if not total:
        return None
    return round(float(total["spot"]) * (1.0 if record.get("currency") == "EUR" else rate), 6)


def run_trial(
    cfg: TuneConfig,
    study: Any,
    trial: Any,
    space: Any,
    base: Any,
    parent_run: str | None,
    outage: Outage | None = None,
) -> int:
    """One trial = one training run in DIR/trials/<number>; returns the trainer's exit code (0 or 75).

    `outage`: the study's tracking.Outage (None: untracked); the trainer's Tracker shares it (tracking.study_scope).
    """
    import json

    from optuna.trial import TrialState

    from training import tune_report
    from training.config import apply_overrides
    from training.loop import Hooks
    from training.trainer import run as train

    number = trial.number
    params = {p.key: p.suggest(trial) for p in space.params}
    extra = {k: str(v) for k, v in params.items()}
    if cfg.checkpoint_uri:
        extra["checkpoint.uri"] = f"{cfg.checkpoint_uri.rstrip('/')}/trial-{number}"
    config = apply_overrides(base, extra)
    out = cfg.output / "trials" / str(number)
    frozen = study._storage.get_trial(trial._trial_id)
    elapsed_before = float(frozen.user_attrs.get(ELAPSED, 0.0))
    price, rate = _price_eur_per_s(config, space.eur_per_usd)
    limit = cfg.trial_timeout_s - elapsed_before
    if cfg.budget_eur is not None and price:
        # Stop where the budget runs out, not only at the next trial boundary.
        limit = min(limit, (cfg.budget_eur - spent_eur(study)) / price)
    start = time.monotonic()
    # The pruner judges the preset's pruning metric (search_space.json), best so far: the trial's value is
    # its best validation too (the best checkpoint's). A resumed trial carries its earlier attempts' best.
    judged = space.pruning.metric
    best = [max(frozen.intermediate_values.values(), default=float("-inf"))]

    def on_evaluate(step: int, scores: dict[str, float]) -> bool:
        best[0] = max(best[0], scores[judged])
        trial.report(best[0], step)
        if trial.should_prune():
            trial.set_user_attr(PRUNED_AT, step)
            log.info("trial %d pruned at step %d (best validation %s %.4f)", number, step, judged, best[0])
            return True
        return False

    hooks = Hooks(on_evaluate=on_evaluate, deadline=start + max(limit, 0.0))
    log.info(
        "trial %d (worker %s): %s", number, cfg.worker_id, " ".join(f"{k}={v}" for k, v in extra.items())
    )
    if outage is not None:
        outage.run_id = None  # set by the trainer's Tracker when this trial's MLflow run starts
    try:
        rc = train(config, out, hooks)
    except StorageUnavailable:
        # The store is down, not the trial (exit 69, its checkpoint kept locally): left RUNNING, as a preempted
        # trial is, so this worker's rerun resumes it instead of starting a new one and counting a failure.
        trial.set_user_attr(ELAPSED, round(elapsed_before + time.monotonic() - start, 3))
        raise
    except Exception:
        # A crash or bad input is not resumable: FAIL it, or every rerun would resume the same crash.
        trial.set_user_attr(ELAPSED, round(elapsed_before + time.monotonic() - start, 3))
        _tell(study, trial, state=TrialState.FAIL)
        raise
    trial.set_user_attr(ELAPSED, round(elapsed_before + time.monotonic() - start, 3))
    if parent_run and outage is not None:
        tune_report.tag_child(outage, parent_run, number)
    if rc == EXIT_PREEMPTED:
        return rc  # left RUNNING for this worker's rerun
    cost_eur = _trial_cost_eur(out, rate)
    trial.set_user_attr(COST_EUR, cost_eur)
    if hooks.stopped == "deadline":
        trial.set_user_attr(STOPPED, "time_limit")
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    frozen = study._storage.get_trial(trial._trial_id)
    if PRUNED_AT in frozen.user_attrs:
        # Optuna gives a pruned trial its last report as value (here the pruning metric): keep the objective's.
        trial.set_user_attr(METRIC, float(metrics["validation"]["accuracy"]))
        _tell(study, trial, state=TrialState.PRUNED)
    else:
        _tell(study, trial, float(metrics["validation"]["accuracy"]))
    return EXIT_OK


def _tell(study: Any, trial: Any, *args: Any, **kwargs: Any) -> None:
    try:
        study.tell(trial, *args, **kwargs)
    except RuntimeError as exc:
        # GridSampler calls study.stop() once the grid is used up, which only works inside optimize(); the
        # trial is stored before that (optuna/study/_tell.py), and this loop caps --trials at the grid size.
        if "Study.stop" not in str(exc):
            raise


def tune(cfg: TuneConfig) -> int:
    """Run this worker's share of the study; 0 when the study is done, 75 when preempted (rerun to resume)."""
    from optuna.trial import TrialState

    from training import presets, search_space, tracking, tune_definition, tune_report, tune_trials
    from training.config import apply_overrides

    space = search_space.load(cfg.preset, cfg.space_file or search_space.SPACES)
    base = apply_overrides(apply_overrides(presets.get(cfg.preset), space.fixed), list(cfg.overrides))
    cfg = tune_trials.with_checkpoint_prefix(cfg, base)
    trials = min(cfg.trials, _grid_size(space)) if cfg.sampler == "grid" else cfg.trials
    study = open_study(cfg, space, base.name)
    tune_definition.check(study, cfg, space, base)  # a resumed study searches what it searched
    tune_trials.refuse_leftovers(cfg, study)
    parent_run, outage = tune_report.mlflow_parent(cfg, study, base)
    flag = _StopFlag()
    previous = {sig: signal.signal(sig, flag) for sig in (signal.SIGTERM, signal.SIGINT)}
    stopped_by = "trials"
    try:
        with tracking.study_scope(outage):  # the trials' Trackers share the study's Outage
            while True:
                if flag.reason:
                    log.warning("%s between trials: exit %d, rerun to continue", flag.reason, EXIT_PREEMPTED)
                    return EXIT_PREEMPTED
                trial = _orphan(study, cfg.worker_id)
                if trial is not None:
                    log.info("resuming trial %d left running by this worker", trial.number)
                else:
                    if cfg.budget_eur is not None and spent_eur(study) >= cfg.budget_eur:
                        stopped_by = "budget"
                        break
                    if len(study.get_trials(deepcopy=False)) >= trials:
                        break
                    trial = study.ask()
                    # Another worker took the last slot between the check and ask().
                    if trial.number >= trials:
                        trial.set_user_attr(STOPPED, "surplus")
                        _tell(study, trial, state=TrialState.FAIL)
                        break
                    trial.set_user_attr(WORKER, cfg.worker_id)
                if run_trial(cfg, study, trial, space, base, parent_run, outage) == EXIT_PREEMPTED:
                    return EXIT_PREEMPTED
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    tune_report.finish(cfg, study, space, stopped_by, parent_run, outage)
    return EXIT_OK


def _grid_size(space: Any) -> int:
    size = 1
    for values in space.grid().values():
        size *= len(values)
    return size


# --------------------------------------------------------------------------- CLI


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help="hyperparameter search with Optuna: pruning, per-trial time limit, EUR budget (exit 75: rerun)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--preset", default="smoke", help="smoke | demo | gpu (default %(default)s)")
    p.add_argument("--trials", type=int, required=True, help="trials in the study, all workers together")
    p.add_argument("--trial-timeout", type=float, required=True, metavar="SECONDS", help="limit per trial")
    p.add_argument("--budget-eur", type=float, default=None, help="stop when the trials' cost reaches this")
    p.add_argument("--sampler", default="tpe", choices=SAMPLERS)
    p.add_argument("--pruner", default="median", choices=PRUNERS)
    p.add_argument("--storage", default=None, help="Optuna storage URL (default sqlite:///DIR/study.db)")
    p.add_argument("--study-name", default=None, help="default <model name>-<preset>")
    p.add_argument("--worker", default=None, help="worker id (default $JOB_COMPLETION_INDEX or host name)")
    p.add_argument("--seed", type=int, default=0, help="sampler seed")
    p.add_argument("--checkpoint-uri", default=None, help="prefix for the trials' checkpoints (bucket)")
    p.add_argument(
        "--space", type=Path, default=None, help="search-space JSON (default training/search_space.json)"
    )
    p.add_argument("--output", type=Path, required=True, help="study folder")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="training overrides for every trial")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    from training.trainer import _setup_logging

    cfg = TuneConfig(
        preset=args.preset,
        output=args.output,
        trials=args.trials,
        trial_timeout_s=args.trial_timeout,
        budget_eur=args.budget_eur,
        sampler=args.sampler,
        pruner=args.pruner,
        storage=args.storage or os.environ.get("TRAINING_TUNE_STORAGE") or None,
        study_name=args.study_name,
        worker=args.worker,
        seed=args.seed,
        checkpoint_uri=args.checkpoint_uri,
        overrides=tuple(args.overrides),
        space_file=args.space,
    )
    _setup_logging(0)
    logging.getLogger("training.tune").setLevel(logging.INFO)
    return tune(cfg)
