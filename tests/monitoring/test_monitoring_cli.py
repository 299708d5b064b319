"""The CLI's surface: help without heavy SDKs, env listing, windows of texts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "transformers", "onnxruntime", "tritonclient", "evidently", "pulumi_aws", "pandas")


def test_help_and_env_import_no_heavy_library() -> None:
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['monitoring', '--help']\n"
        "try:\n"
        "    runpy.run_module('monitoring', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as e:\n"
        "    assert e.code in (0, None), e.code\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "HEAVY="
    env = subprocess.run(
        [sys.executable, "-m", "monitoring", "env"], capture_output=True, text=True, timeout=60
    )
    assert env.returncode == 0 and "MONITORING_SAMPLE_RATE (float, default 0.0)" in env.stdout


def test_texts_windows(tmp_path: Path) -> None:
    out = tmp_path / "shifted.txt"
    done = subprocess.run([sys.executable, "-m", "monitoring", "texts", "--shifted", "--rows", "5", "--out", str(out)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and len(out.read_text().splitlines()) == 5
    bad = subprocess.run([sys.executable, "-m", "monitoring", "texts", "--out", str(out)],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "--manifest" in bad.stderr
