"""benchmarks/train_gpu.py in its dry mode: the GPU benchmark's code paths on CPU, in a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
@pytest.mark.slow
def test_gpu_benchmark_dry_run_measures_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "train_gpu.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRAINING_CACHE_DIR": os.environ["TRAINING_CACHE_DIR"]}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.train_gpu", "--dry-run", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["dry_run"] is True and report["device"] == "cpu"
    assert report["steps"] == 12 and report["samples_per_s"] > 0
    # MFU from the architecture's FLOPs and the batches' real shapes (against a nominal CPU peak here)
    assert 0 < report["mfu"] < 1 and report["achieved_tflops"] > 0 and report["padded_tokens"] > 0
    assert report["checkpoint"]["saves"] >= 3 and report["checkpoint"]["stall_max_s"] > 0
    assert "load_average_1m" in report


def test_gpu_benchmark_without_a_gpu_says_so_and_fails(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the real benchmark would run")
    from benchmarks import train_gpu

    with pytest.raises(SystemExit) as info:
        train_gpu.main(["--out", str(tmp_path / "x.json")])
    assert "no CUDA device" in str(info.value.code) and "--dry-run" in str(info.value.code)
