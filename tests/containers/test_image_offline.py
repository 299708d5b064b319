"""The training image's processes call no one: MLflow's usage telemetry is off in the image's environment.

MLflow switches telemetry off by itself only in CI; in the cluster (the pipeline's promote and evaluate steps,
the monitoring jobs) it sent usage records with an installation id. The check runs MLflow's own decision with
the Dockerfile's ENV and no CI marker.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dockerfile_parse import DockerfileParser

from tests.offline import env_outside_ci

ROOT = Path(__file__).resolve().parents[2]
PROBE = "from mlflow.telemetry.utils import is_telemetry_disabled as off; raise SystemExit(0 if off() else 1)"


def decision(env: dict[str, str]) -> int:
    base = env_outside_ci("MLFLOW_", "DO_NOT")
    return subprocess.run(
        [sys.executable, "-c", PROBE], env={**base, **env}, check=False, timeout=120
    ).returncode


def test_the_training_image_runs_mlflow_with_telemetry_off() -> None:
    image_env = DockerfileParser(path=str(ROOT / "containers" / "training" / "Dockerfile")).envs
    assert decision({}) == 1, "MLflow's telemetry is off without any setting: the check would prove nothing"
    assert (
        decision({k: image_env[k] for k in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK") if k in image_env})
        == 0
    )
