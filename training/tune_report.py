"""What a study leaves behind: DIR/study.json, Optuna's plots, the best trial's model, the MLflow parent run."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from training import tracking
from training.tracking import Outage
from training.tune import COST_EUR, ELAPSED, METRIC, PRUNED_AT, STOPPED, TuneConfig

log = logging.getLogger("training.tune")

PARENT_RUN = "mlflow_parent_run_id"
PLOTS = {"optimization_history": "plot_optimization_history", "param_importances": "plot_param_importances"}


def trial_state(t: Any) -> str:
    """Optuna's state name, except a trial ended by its time limit: TIME_LIMIT (its value is still valid)."""
    if t.user_attrs.get(STOPPED) == "time_limit":
        return "TIME_LIMIT"
    return str(t.state.name)


def _value(t: Any) -> float | None:
    """The trial's val_accuracy; a pruned trial's Optuna value is its last report of the pruning metric."""
    if METRIC in t.user_attrs:
        return float(t.user_attrs[METRIC])
    return None if t.value is None else float(t.value)


def study_record(study: Any, cfg: TuneConfig, eur_per_usd: float, stopped_by: str) -> dict[str, Any]:
    """study.json: exactly the keys documented in training/README.md."""
    from optuna.trial import TrialState

    trials = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(STOPPED) != "surplus"]
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    best = max(done, key=lambda t: t.value) if done else None
    spent = sum(float(t.user_attrs.get(COST_EUR) or 0.0) for t in trials)
    return {
        "best_params": dict(best.params) if best else {},
        "best_value": float(best.value) if best else None,
        "metric": METRIC,
        "trials": [
            {
                "number": t.number,
                "state": trial_state(t),
                "value": _value(t),
                "duration_s": t.user_attrs.get(ELAPSED),
                "cost_eur": t.user_attrs.get(COST_EUR),
                "pruned_at_step": t.user_attrs.get(PRUNED_AT),
            }
            for t in trials
        ],
        "budget": {
            "limit_eur": cfg.budget_eur,
            "spent_eur": round(spent, 6),
            "trials_limit": cfg.trials,
            "stopped_by": stopped_by,
            "eur_per_usd": eur_per_usd,
            "price": "spot, training/prices.json (as cost.json)",
        },
    }


def best_number(study: Any) -> int | None:
    from optuna.trial import TrialState

    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.value is not None]
    return max(done, key=lambda t: t.value).number if done else None


def save_plots(study: Any, folder: Path) -> list[str]:
    """Optuna's own matplotlib plots as PNG; a plot Optuna cannot draw yet (one trial) is skipped, not faked."""
    import matplotlib

    matplotlib.use("Agg")
    import warnings

    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as ovm
    from optuna.exceptions import ExperimentalWarning

    warnings.filterwarnings(
        "ignore", category=ExperimentalWarning
    )  # the plots are stable enough for a report
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fn in PLOTS.items():
        try:
            ax = getattr(ovm, fn)(study)
        except (ValueError, RuntimeError) as exc:  # e.g. importances need two finished trials
            log.info("plot %s skipped: %s", name, exc)
            continue
        fig = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
        fig.set_size_inches(8, 5)
        fig.tight_layout()
        fig.savefig(folder / f"{name}.png", dpi=100)
        plt.close(fig)
        written.append(name)
    return written


# The best trial's files a study folder carries beside its model/ (as a single run's folder does).
BEST_FILES = ("metrics.json", "cost.json", "manifest.json")


def copy_best(cfg: TuneConfig, number: int) -> None:
    """DIR/model, metrics.json, cost.json: the best trial, laid out like a training run for export and promotion."""
    src = cfg.output / "trials" / str(number)
    if (cfg.output / "model").exists():
        shutil.rmtree(cfg.output / "model")
    (cfg.output / "best_trial.txt").write_text(f"{number}\n", encoding="utf-8")
    if not (src / "model").is_dir():
        _point_to_best(cfg, number)
        return
    shutil.copytree(src / "model", cfg.output / "model")
    for name in BEST_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, cfg.output / name)


def _point_to_best(cfg: TuneConfig, number: int) -> None:
    """The best trial ran on another worker (its own pod and output folder): say where its weights are.

    Several workers (launch --tune) each finish the study; only the one that ran the best trial holds its
    model folder. The others record the pointer and succeed: a failure here would fail the whole Job.
    """
    from training.checkpoint import BEST_PREFIX

    if cfg.checkpoint_uri:
        where = f"{cfg.checkpoint_uri.rstrip('/')}/trial-{number}/{BEST_PREFIX}<step>/"
    else:
        where = f"OUTPUT/trials/{number}/checkpoints/{BEST_PREFIX}<step>/ on the worker that ran it"
    for name in BEST_FILES:  # this worker's own best, now stale
        (cfg.output / name).unlink(missing_ok=True)
    pointer = {"best_trial": number, "model": None, "weights": where}
    (cfg.output / "best_trial.json").write_text(json.dumps(pointer, indent=2), encoding="utf-8")
    log.warning(
        "best trial %d ran on another worker: its model folder is not here; its weights are at %s",
        number,
        where,
    )


def finish(
    cfg: TuneConfig,
    study: Any,
    space: Any,
    stopped_by: str,
    parent_run: str | None,
    outage: Outage | None = None,
) -> dict[str, Any]:
    import optuna.logging

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    record = study_record(study, cfg, space.eur_per_usd, stopped_by)
    tmp = cfg.output / ".study.json.tmp"
    tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
    tmp.replace(cfg.output / "study.json")  # several workers may finish: each writes a whole file
    save_plots(study, cfg.output / "plots")
    number = best_number(study)
    if number is not None:
        copy_best(cfg, number)
    if parent_run and outage is not None:
        _end_parent(outage, parent_run, record, cfg.output)
    log.info(
        "study done (%s): best %s=%s with %s; %d trials; %.4f EUR spent",
        stopped_by,
        METRIC,
        record["best_value"],
        record["best_params"],
        len(record["trials"]),
        record["budget"]["spent_eur"],
    )
    return record


def _tracking(cfg: TuneConfig) -> bool:
    """Every trial and the study share one MLflow store: $MLFLOW_TRACKING_URI or DIR/mlruns."""
    from training import environment as env

    if not env.TRAINING_MLFLOW.get():
        return False
    if not env.MLFLOW_TRACKING_URI.get():
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        os.environ["MLFLOW_TRACKING_URI"] = (cfg.output / "mlruns").resolve().as_uri()
    return True


def client() -> Any:
    """A client of the study's store, named explicitly: MLflow's process-wide tracking URI is whatever the
    last `mlflow.set_tracking_uri` said (the trainer's, or an earlier run's in the same process)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])


def mlflow_parent(cfg: TuneConfig, study: Any, base: Any) -> tuple[str | None, Outage | None]:
    """The study's MLflow run (trials are its children; its id lives in the study storage for all workers) and the
    study's Outage (None: untracked). A store that fails here, before the study has a trial, is a setup error
    (exit 2); once it has trials, the study goes on untracked (training/tracking.py)."""
    if not base.mlflow or not _tracking(cfg):
        return None, None
    uri = os.environ["MLFLOW_TRACKING_URI"]
    outage = Outage(uri, "the study goes on untracked; its trials' results are in study.json")
    tracking.bound_http_waits()
    existing = study.user_attrs.get(PARENT_RUN)
    if existing:
        return str(existing), outage
    try:
        run_id = _create_parent(cfg, study, base)
    except tracking.store_errors() as exc:
        if not study.get_trials(deepcopy=False):
            raise tracking.start_error(uri, "study", exc, "tune untracked") from exc
        outage.fail("create the study's run", exc)
        return None, outage
    study.set_user_attr(PARENT_RUN, run_id)
    return run_id, outage


def _create_parent(cfg: TuneConfig, study: Any, base: Any) -> str:
    from training import environment as env

    mlc = client()
    name = env.MLFLOW_EXPERIMENT_NAME.get() or base.name
    exp = mlc.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp else mlc.create_experiment(name)
    run = mlc.create_run(exp_id, tags={"mlflow.runName": f"study {study.study_name}"})
    for key, value in (("preset", cfg.preset), ("trials", cfg.trials), ("sampler", cfg.sampler)):
        mlc.log_param(run.info.run_id, key, str(value))
    mlc.log_param(run.info.run_id, "pruner", cfg.pruner)
    mlc.log_param(run.info.run_id, "trial_timeout_s", str(cfg.trial_timeout_s))
    mlc.log_param(run.info.run_id, "budget_eur", str(cfg.budget_eur))
    return str(run.info.run_id)


def tag_child(outage: Outage, parent_run: str, number: int) -> None:
    """The trial's MLflow run (the one its Tracker started, known without asking the server) becomes a child of
    the study's run. A trial that ran untracked has none: nothing is tagged (not the previous trial's run)."""
    child = outage.run_id
    if child is None or child == parent_run:
        return
    mlc = client()
    what = f"tag trial {number}'s run"
    outage.call(what, mlc.set_tag, child, "mlflow.parentRunId", parent_run)
    outage.call(what, mlc.set_tag, child, "optuna.trial", str(number))


def _end_parent(outage: Outage, run_id: str, record: dict[str, Any], output: Path) -> None:
    """After a failure (here or in a trial) the rest is skipped: the run stays RUNNING, study.json has it all."""
    mlc = client()
    what = "log the study's results"
    if record["best_value"] is not None:
        outage.call(what, mlc.log_metric, run_id, f"best_{METRIC}", record["best_value"])
    outage.call(what, mlc.log_metric, run_id, "spent_eur", record["budget"]["spent_eur"])
    outage.call(what, mlc.log_artifact, run_id, str(output / "study.json"))
    for png in sorted((output / "plots").glob("*.png")):
        outage.call(what, mlc.log_artifact, run_id, str(png), artifact_path="plots")
    outage.call("end the study's run", mlc.set_terminated, run_id, "FINISHED")
