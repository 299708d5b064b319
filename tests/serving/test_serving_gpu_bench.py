"""benchmarks/serve_gpu.py is prepared for a lent GPU; here (no GPU) it must refuse clearly, not half-run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.serve_gpu", *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )  # fmt: skip


def test_without_a_gpu_it_exits_2_and_says_what_is_missing(tmp_path: Path) -> None:
    # A PATH with python only: no nvidia-smi, whatever the machine has.
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    done = run("--out", str(tmp_path / "gpu.json"), env=env)
    assert done.returncode == 2, done.stderr
    assert "no NVIDIA GPU" in done.stderr
    assert not (tmp_path / "gpu.json").exists()


def test_help_names_the_budget_and_imports_nothing_heavy() -> None:
    code = (
        "import sys, runpy; sys.argv = ['serve_gpu', '--help']\n"
        "try:\n    runpy.run_module('benchmarks.serve_gpu', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'onnxruntime', 'tritonclient', 'transformers') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "--budget-s" in done.stdout and "HEAVY []" in done.stdout, done.stdout + done.stderr
