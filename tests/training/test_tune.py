"""`python -m training tune`: real Optuna studies of real (tiny, `smoke`) training runs.

In-process: the time limit, pruning and the budget stop. Subprocesses (the real CLI): a SIGTERM'd trial
exits 75 and the rerun resumes the SAME trial, and two workers on one SQLite study never run one trial twice.
Each test writes its own small search space (same format as training/search_space.json) so trials are short.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from training.tune import TuneConfig, tune

ROOT = Path(__file__).resolve().parents[2]
FIXED = {"eval_every_steps": "5", "baselines": "false", "export": "false", "mlflow": "false"}


def space(tmp: Path, params: dict, pruning: dict | None = None, **fixed: str) -> Path:
    path = tmp / "space.json"
    entry = {"fixed": {**FIXED, **fixed}, "params": params, **({"pruning": pruning} if pruning else {})}
    doc = {"eur_per_usd": 0.86, "presets": {"smoke": entry}}
    path.write_text(json.dumps(doc))
    return path


def lr_space(tmp: Path, values: list[float], pruning: dict | None = None, **fixed: str) -> Path:
    lr = {"optim.lr": {"type": "categorical", "choices": values, "grid": values}}
    return space(tmp, lr, pruning, **fixed)


def study(out: Path) -> dict:
    return json.loads((out / "study.json").read_text())


def test_search_space_is_data_and_checked() -> None:
    from training import search_space
    from training.errors import ConfigError

    for preset in ("smoke", "demo", "gpu"):
        keys = {p.key for p in search_space.load(preset).params}
        assert keys == {
            "optim.lr",
            "optim.warmup_fraction",
            "optim.weight_decay",
            "batch_size",
            "epochs",
            "data.max_length",
        }
    with pytest.raises(ConfigError, match="optim.lrr"):
        search_space._param("smoke", "optim.lrr", {"type": "float", "low": 0.1, "high": 0.01, "grid": [0.1]})


def test_pruning_block_is_checked(tmp_path: Path) -> None:
    from training import search_space
    from training.errors import ConfigError

    smoke = search_space.load("smoke").pruning
    assert smoke.metric == "auc"  # the shipped smoke space prunes on validation AUC (training/README.md)
    assert search_space.load("smoke", lr_space(tmp_path, [3e-3])).pruning.metric == "accuracy"  # no block
    with pytest.raises(ConfigError, match="accuracy, f1, auc"):
        search_space.load("smoke", lr_space(tmp_path, [3e-3], {"metric": "loss"}))
    with pytest.raises(ConfigError, match="n_startup_trials"):
        search_space.load("smoke", lr_space(tmp_path, [3e-3], {"median": {"n_startup": 1}}))


def test_cli_rejects_bad_arguments(tmp_path: Path) -> None:
    from training.cli import main

    assert main(["tune", "--trials", "0", "--trial-timeout", "5", "--output", str(tmp_path)]) == 2


@pytest.mark.integration
def test_time_limit_ends_the_trial_cleanly_at_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 60 epochs (1,500 steps) cannot finish in 4 s: the loop must stop itself, checkpoint, and report.
    monkeypatch.setenv("TRAINING_MLFLOW", "1")  # this test also checks the trial's MLflow child run
    out = tmp_path / "study"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (out / "mlruns").resolve().as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    cfg = TuneConfig(
        preset="smoke",
        output=out,
        trials=1,
        trial_timeout_s=4,
        pruner="none",
        sampler="grid",
        space_file=lr_space(tmp_path, [3e-3], epochs="60", mlflow="true"),
    )
    assert tune(cfg) == 0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(out / "mlruns").resolve().as_uri())
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 1
    assert children[0].data.tags["mlflow.parentRunId"] == parents[0].info.run_id
    assert children[0].data.tags["optuna.trial"] == "0" and "test_accuracy" in children[0].data.metrics
    assert parents[0].info.status == "FINISHED"
    trial = study(out)["trials"][0]
    assert trial["state"] == "TIME_LIMIT"
    assert trial["value"] is not None and trial["duration_s"] > 0  # no wall-clock bound: the CPU is shared
    metrics = json.loads((out / "trials" / "0" / "metrics.json").read_text())
    assert 0 < metrics["steps"] < 60 * 25
    from training.checkpoint import step_name

    checkpoint = out / "trials" / "0" / "checkpoints" / step_name(metrics["steps"])
    assert (checkpoint / "MANIFEST.json").is_file()  # saved at the step the deadline ended


@pytest.mark.integration
def test_pruner_stops_a_trial_that_does_not_learn(tmp_path: Path) -> None:
    # Grid order with seed 1: lr 3e-3 completes first; lr 1e-7 stays at the majority class and is pruned.
    out = tmp_path / "study"
    cfg = TuneConfig(
        preset="smoke",
        output=out,
        trials=2,
        trial_timeout_s=120,
        sampler="grid",
        pruner="median",
        seed=1,
        space_file=lr_space(tmp_path, [3e-3, 1e-7], epochs="3"),
    )
    assert tune(cfg) == 0
    record = study(out)
    by_state = {t["state"]: t for t in record["trials"]}
    assert set(by_state) == {"COMPLETE", "PRUNED"}
    pruned = by_state["PRUNED"]
    assert 0 < pruned["pruned_at_step"] < 75  # before its 3 epochs x 25 steps
    metrics = json.loads((out / "trials" / str(pruned["number"]) / "metrics.json").read_text())
    assert metrics["steps"] == pruned["pruned_at_step"]
    # A pruned trial's weights are never used: no test scoring, no model folder (its best stays in best-<step>/).
    trial_dir = out / "trials" / str(pruned["number"])
    assert metrics["test"] is None and metrics["stopped_by_caller"] is True
    assert not (trial_dir / "model").exists() and (trial_dir / "cost.json").is_file()
    assert any(p.name.startswith("best-") for p in (trial_dir / "checkpoints").iterdir())
    best_row = next(
        h for h in metrics["history"] if h["step"] == metrics["best_step"] and "val_accuracy" in h
    )
    assert pruned["value"] == metrics["validation"]["accuracy"] == best_row["val_accuracy"]
    finished = json.loads((out / "trials" / str(by_state["COMPLETE"]["number"]) / "metrics.json").read_text())
    assert finished["test"]["accuracy"] > 0 and "stopped_by_caller" not in finished
    assert record["best_value"] == by_state["COMPLETE"]["value"] and record["best_params"] == {
        "optim.lr": 3e-3
    }
    assert set(record) == {"best_params", "best_value", "metric", "trials", "budget"}
    assert set(pruned) == {"number", "state", "value", "duration_s", "cost_eur", "pruned_at_step"}
    assert (out / "plots" / "optimization_history.png").stat().st_size > 0
    assert (out / "model" / "config.json").is_file()  # the best trial, laid out like a training run


@pytest.mark.integration
def test_pruner_judges_the_configured_intermediate_metric(tmp_path: Path) -> None:
    # The space says: prune on validation AUC. What the study storage holds as each trial's intermediate values
    # (what the pruner read) must be the best-so-far validation AUC of that trial's own run, and the pruned
    # trial must have been stopped where that value fell below the finished trial's at the same step.
    import optuna

    out = tmp_path / "study"
    pruning = {"metric": "auc", "median": {"n_startup_trials": 1, "n_warmup_steps": 0, "interval_steps": 1}}
    cfg = TuneConfig(
        preset="smoke",
        output=out,
        trials=2,
        trial_timeout_s=120,
        sampler="grid",
        pruner="median",
        seed=1,  # grid order: lr 3e-3 first (it learns), then 1e-7 (it does not)
        space_file=lr_space(tmp_path, [3e-3, 1e-7], pruning, epochs="2"),
    )
    assert tune(cfg) == 0
    loaded = optuna.load_study(study_name="sentiment-smoke-smoke", storage=cfg.storage_url)
    trials = {t.state.name: t for t in loaded.trials}
    assert set(trials) == {"COMPLETE", "PRUNED"}
    for t in trials.values():
        history = json.loads((out / "trials" / str(t.number) / "metrics.json").read_text())["history"]
        aucs = [(h["step"], h["val_auc"]) for h in history if "val_auc" in h]
        best = [max(v for _, v in aucs[: i + 1]) for i in range(len(aucs))]
        assert t.intermediate_values == {step: b for (step, _), b in zip(aucs, best, strict=True)}
    pruned, reference = trials["PRUNED"], trials["COMPLETE"]
    step = pruned.user_attrs["pruned_at_step"]
    assert step == max(pruned.intermediate_values) < 50  # stopped at its last report, before its 50 steps
    assert pruned.intermediate_values[step] < reference.intermediate_values[step]
    record = study(out)
    assert record["metric"] == "val_accuracy"  # the objective is still validation accuracy
    assert reference.value == record["best_value"]
    # study.json gives the pruned trial its validation accuracy, not Optuna's last report (an AUC)
    pruned_metrics = json.loads((out / "trials" / str(pruned.number) / "metrics.json").read_text())
    by_number = {t["number"]: t for t in record["trials"]}
    assert by_number[pruned.number]["value"] == pruned_metrics["validation"]["accuracy"]


@pytest.mark.integration
def test_budget_stops_the_study(tmp_path: Path) -> None:
    # g5.xlarge spot at 0.45 USD/h (training/prices.json) x 0.86 EUR/USD: 0.0004 EUR buys ~3.7 s.
    out = tmp_path / "study"
    cfg = TuneConfig(
        preset="smoke",
        output=out,
        trials=5,
        trial_timeout_s=120,
        budget_eur=0.0004,
        pruner="none",
        space_file=lr_space(tmp_path, [3e-3, 2e-3], epochs="60"),
        overrides=("cloud=aws", "region=eu-west-1", "instance_type=g5.xlarge"),
    )
    assert tune(cfg) == 0
    record = study(out)
    assert record["budget"]["stopped_by"] == "budget"
    assert len(record["trials"]) == 1  # of 5: the first one used the budget up
    assert record["trials"][0]["state"] == "TIME_LIMIT"  # its deadline was cut where the money ran out
    assert record["budget"]["spent_eur"] >= 0.0004
    assert record["trials"][0]["cost_eur"] == record["budget"]["spent_eur"]


def _cli(out: Path, space_file: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "training",
        "tune",
        "--preset",
        "smoke",
        "--space",
        str(space_file),
        "--output",
        str(out),
        "--pruner",
        "none",
        *extra,
    ]


def workers_space(tmp_path: Path) -> Path:
    """A one-parameter space whose trials take seconds: for the tests that run several workers."""
    return space(
        tmp_path,
        {"optim.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True, "grid": [1e-3]}},
        epochs="1",
        eval_every_steps="25",
    )


def start_workers(
    outs: dict[str, Path], space_file: Path, env: dict[str, str]
) -> dict[str, subprocess.Popen[str]]:
    """`tune` workers named by `outs`' keys (3 trials in all, random sampler), each writing to its own `--output`."""
    return {
        w: subprocess.Popen(
            _cli(
                out,
                space_file,
                "--trials",
                "3",
                "--trial-timeout",
                "60",
                "--worker",
                w,
                "--sampler",
                "random",
            ),
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for w, out in outs.items()
    }


@pytest.mark.integration
@pytest.mark.slow
def test_preempted_trial_resumes_as_the_same_trial(tmp_path: Path) -> None:
    out = tmp_path / "study"
    # 4 epochs (100 steps): the SIGTERM after the first checkpoint (step 10) still lands over 80 steps before the
    # end; 8 only made the resumed run train 100 more steps for the same proof.
    cmd = _cli(out, lr_space(tmp_path, [3e-3], epochs="4"), "--trials", "1", "--trial-timeout", "20")
    cmd += ["--worker", "w0"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    checkpoints = out / "trials" / "0" / "checkpoints"
    deadline = time.monotonic() + 120
    while not any(checkpoints.glob("step-*/MANIFEST.json")):
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < deadline, "no checkpoint of trial 0 within 120 s"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    first, _ = proc.communicate(timeout=120)
    assert proc.returncode == 75, first
    assert not (out / "study.json").exists()

    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resuming trial 0 left running by this worker" in second.stderr
    record = study(out)
    assert [t["number"] for t in record["trials"]] == [0]  # the same trial, not a new one
    assert record["trials"][0]["state"] in ("COMPLETE", "TIME_LIMIT")
    metrics = json.loads((out / "trials" / "0" / "metrics.json").read_text())
    assert metrics["attempts"] == 2  # resumed from its checkpoint, not restarted


@pytest.mark.integration
@pytest.mark.slow
def test_two_workers_on_one_sqlite_study_never_run_the_same_trial(tmp_path: Path) -> None:
    out = tmp_path / "study"
    procs = start_workers(
        {"a": out, "b": out}, workers_space(tmp_path), {**os.environ, "TRAINING_MLFLOW": "0"}
    )
    logs = {w: p.communicate(timeout=300)[0] for w, p in procs.items()}
    for w, p in procs.items():
        assert p.returncode == 0, logs[w]
    ran = {
        w: {int(line.split("trial ")[1].split()[0]) for line in log.splitlines() if f"(worker {w})" in line}
        for w, log in logs.items()
    }
    assert not ran["a"] & ran["b"], ran
    assert ran["a"] | ran["b"] == {0, 1, 2}
    record = study(out)
    assert sorted(t["number"] for t in record["trials"]) == [0, 1, 2]
    assert all(t["state"] == "COMPLETE" for t in record["trials"])
    for n in range(3):  # each trial's run happened once (one attempt)
        assert json.loads((out / "trials" / str(n) / "metrics.json").read_text())["attempts"] == 1
