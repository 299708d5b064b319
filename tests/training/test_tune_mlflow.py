"""A study against a real `mlflow server` (the Secret `mlflow`'s MLFLOW_TRACKING_URI) that dies mid-study.

Before, a study called MLflow without the trainer's outage policy: the next trial's fresh start raised TrackingError
(exit 2, the study lost), tagging a trial's run waited out MLflow's retries and raised out of the study, and a study
started against a dead server crashed with a traceback after minutes of retries. Now: a dead server at the study's
start is a setup error (exit 2, naming the URI, the Secret and TRAINING_MLFLOW=0); later, one warning, and the study
finishes its trials and study.json untracked.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.training.test_tune import lr_space
from training.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "promotion"))


def _argv(tmp_path: Path, out: Path, trials: int = 3) -> list[str]:
    # Three learning rates on the grid, one epoch (25 steps) each: a few seconds per trial.
    space = lr_space(tmp_path, [3e-3, 2e-3, 1e-3], epochs="1", mlflow="true")
    return ["tune", "--preset", "smoke", "--space", str(space), "--output", str(out), "--trials", str(trials),
            "--trial-timeout", "120", "--pruner", "none", "--sampler", "grid"]  # fmt: skip


def _mlflow_warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "WARNING" in line and "MLflow tracking store" in line]


@pytest.mark.integration
@pytest.mark.slow  # ~25 s each on 2 cores: the server's start (~10 s) and three trials
@pytest.mark.parametrize("when", ["between_trials", "during_a_trial"])
def test_a_study_finishes_untracked_when_its_mlflow_server_dies(
    when: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import mlflow
    import optuna
    from mlflow import MlflowClient
    from promotion_fixtures import mlflow_server

    from localservers import stop_group
    from training import tune

    pytest.importorskip("uvicorn", reason="`mlflow server` needs uvicorn (in the project's lock)")
    monkeypatch.chdir(tmp_path)  # the server keeps logged artifacts in ./mlartifacts: here, not in the repo
    server, url = mlflow_server(tmp_path / "mlflow.db")
    seen: dict[str, list] = {}

    def kill() -> None:
        if "runs" not in seen:  # what the server had before it died
            client = MlflowClient(tracking_uri=url)
            seen["runs"] = client.search_runs([e.experiment_id for e in client.search_experiments()])
            stop_group(server, grace_s=20)

    real_run_trial, real_report = tune.run_trial, optuna.trial.Trial.report

    def run_trial(cfg, study, trial, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if when == "between_trials" and trial.number == 1:
            kill()
        return real_run_trial(cfg, study, trial, *args, **kwargs)

    def report(self, value, step):  # noqa: ANN001, ANN202
        if when == "during_a_trial" and self.number == 1:
            kill()  # trial 1's first validation: its MLflow run is open, its next metrics fail
        return real_report(self, value, step)

    monkeypatch.setattr(tune, "run_trial", run_trial)
    monkeypatch.setattr(optuna.trial.Trial, "report", report)
    monkeypatch.setenv("TRAINING_MLFLOW", "1")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    out = tmp_path / "study"
    try:
        rc = main(_argv(tmp_path, out))
        err = capsys.readouterr().err
    finally:
        stop_group(server, grace_s=20)
        mlflow.set_tracking_uri(None)  # process-wide: later tests in this process pick their own store
    assert rc == 0, err[-3000:]
    assert "Traceback" not in err
    warnings = _mlflow_warnings(err)
    assert len(warnings) == 1 and url in warnings[0] and "goes on untracked" in warnings[0], warnings
    record = json.loads((out / "study.json").read_text())
    assert [t["number"] for t in record["trials"]] == [0, 1, 2]
    assert all(t["state"] == "COMPLETE" and t["value"] is not None for t in record["trials"]), record
    assert (out / "model").is_dir() and record["best_value"] is not None
    # Tracked while the server lived: the study's run, and trial 0's run as its child.
    runs = seen["runs"]
    parents = [r for r in runs if r.data.tags.get("mlflow.runName", "").startswith("study ")]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and children, [r.data.tags for r in runs]
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert children[0].data.tags["optuna.trial"] == "0"


@pytest.mark.integration
def test_a_study_started_against_a_dead_server_is_a_setup_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.training.picked_ports import held_port

    out = tmp_path / "study"
    with held_port() as port:  # nobody listens: the Secret names a server that is down
        url = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("TRAINING_MLFLOW", "1")
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        assert main(_argv(tmp_path, out)) == 2
    err = capsys.readouterr().err
    assert f"error: MLflow tracking store {url} failed at the start of the study" in err, err[-3000:]
    assert "Secret `mlflow`" in err and "TRAINING_MLFLOW=0" in err
    assert not (out / "trials").exists()  # nothing trained
