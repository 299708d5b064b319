"""launch --tune: workers on separate pods (own output folders) share one study; each finishes with exit 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _worker(index: int, storage: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "training",
        "tune",
        "--preset",
        "smoke",
        "--trials",
        "1",
        "--trial-timeout",
        "120",
    ]
    cmd += ["--worker", str(index), "--storage", storage, "--output", str(tmp / f"pod{index}")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.integration
def test_a_worker_without_the_best_trial_points_to_it_and_succeeds(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'shared.db'}"  # stands in for the study's RDB
    first = _worker(0, storage, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert (tmp_path / "pod0" / "model").is_dir()
    second = _worker(1, storage, tmp_path)  # the study is done; the best trial ran on pod 0
    assert second.returncode == 0, second.stderr[-3000:]
    pod1 = tmp_path / "pod1"
    assert not (pod1 / "model").exists()
    assert (pod1 / "best_trial.txt").read_text().strip() == "0"
    pointer = json.loads((pod1 / "best_trial.json").read_text())
    assert pointer["best_trial"] == 0 and pointer["model"] is None and "trials/0/" in pointer["weights"]
    assert "ran on another worker" in second.stderr
