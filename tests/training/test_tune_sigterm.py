"""tune: a SIGTERM while a trial sets up (data, model, resume) stops that trial at once with a checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from training.errors import EXIT_PREEMPTED

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_sigterm_during_trial_setup_is_not_lost(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "training",
        "tune",
        "--preset",
        "smoke",
        "--trials",
        "2",
        "--trial-timeout",
        "120",
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [*cmd, "--output", str(tmp_path / "study")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # the trial's setup starts right after this line
        seen.append(line)
        if "trial 0 (worker" in line:
            proc.send_signal(signal.SIGTERM)
            break
    out = "".join(seen) + proc.communicate(timeout=120)[0]
    assert proc.returncode == EXIT_PREEMPTED, out[-3000:]
    assert "preempted (SIGTERM) at step" in out, out[-3000:]  # the trial itself stopped and saved
    assert "step-000000075 saved" not in out  # not the whole trial first (smoke: 75 steps)
