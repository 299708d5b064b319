"""MLflow tracking (rank 0 only): params, per-step metrics, artifacts.

Default store: a local file store under OUTPUT/mlruns (no server, no sqlite driver needed);
MLFLOW_TRACKING_URI selects a server or database otherwise. A resumed run continues the
same MLflow run (its id travels in the checkpoint) when the store is the same.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class Tracker:
    """A no-op unless enabled; MLflow is imported only when used."""

    def __init__(self, enabled: bool, output: Path, experiment: str) -> None:
        self.enabled = enabled
        self.run_id: str | None = None
        self._mlflow: Any = None
        self._output = output
        self._experiment = experiment

    def start(self, params: dict[str, Any], run_id: str | None = None) -> str | None:
        if not self.enabled:
            return None
        import mlflow

        from training import environment as env

        uri = env.MLFLOW_TRACKING_URI.get()
        if not uri:
            # MLflow 3 refuses file stores unless asked; a local file store is what a laptop wants.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = (self._output / "mlruns").resolve().as_uri()
        mlflow.set_tracking_uri(uri)
        mlflow.set_experiment(env.MLFLOW_EXPERIMENT_NAME.get() or self._experiment)
        run = None
        if run_id:
            try:
                run = mlflow.start_run(run_id=run_id)
            except Exception:  # a different store: the old run is not here
                log.info("MLflow run %s not found in %s; starting a new run", run_id, uri)
        if run is None:
            run = mlflow.start_run()
            mlflow.log_params({k: ("none" if v is None else str(v))[:500] for k, v in params.items()})
        self._mlflow = mlflow
        self.run_id = run.info.run_id
        return self.run_id

    def metrics(self, values: dict[str, float], step: int) -> None:
        if self._mlflow is not None:
            self._mlflow.log_metrics({k: float(v) for k, v in values.items()}, step=step)

    def artifact(self, path: Path) -> None:
        if self._mlflow is not None and path.exists():
            if path.is_dir():
                self._mlflow.log_artifacts(str(path), artifact_path=path.name)
            else:
                self._mlflow.log_artifact(str(path))

    def end(self, status: str = "FINISHED") -> None:
        if self._mlflow is not None:
            self._mlflow.end_run(status=status)
            self._mlflow = None
