"""`make demo` on a laptop calls no one: the tools it drives keep their telemetry and update checks off.

Outside CI (MLflow and others switch themselves off when CI or PYTEST_CURRENT_TEST is set), MLflow sent usage
telemetry with a persistent installation id written to ~/.config/mlflow/telemetry.json, and Checkov asked
PyPI for a newer release on every run. The probe runs as a command of the real demo (its Runner, its
environment), with the CI markers removed and HOME in a scratch folder.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.offline import env_outside_ci

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import os, sys
import mlflow
from mlflow.telemetry.utils import is_telemetry_disabled
client = mlflow.MlflowClient(tracking_uri="sqlite:///" + sys.argv[1], registry_uri="sqlite:///" + sys.argv[1])
client.search_registered_models()
calls = []
if not is_telemetry_disabled():
    calls.append("MLflow telemetry")
if os.environ.get("CKV_SKIP_PACKAGE_UPDATE_CHECK", "").lower() != "true":
    calls.append("Checkov's update check")
print("would call home:", calls)
sys.exit(1 if calls else 0)
"""

DEMO = """
import sys
from pathlib import Path
import demo.pipeline as p

p.missing_tools = lambda: []
def probe(r, cfg, summary):
    with r.stage("policy", "probe"):
        r.run([sys.executable, "-c", sys.argv[2], str(cfg.work / "probe.db")], timeout_s=120)
    raise SystemExit(0)  # the rest of the demo is not needed
p.stage_policy = probe
root = Path(sys.argv[1])
sys.exit(p.run(p.DemoConfig(reports=root / "reports", work=root / "work", fast=True, quiet=True)))
"""


def test_the_demo_runs_its_commands_with_telemetry_and_update_checks_off(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = env_outside_ci() | {"HOME": str(home)}
    result = subprocess.run(
        [sys.executable, "-c", DEMO, str(tmp_path), PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    log = tmp_path / "reports" / "demo" / "logs" / "1-policy.log"
    assert result.returncode == 0, log.read_text() if log.exists() else result.stdout + result.stderr
    assert not (home / ".config" / "mlflow").exists()
