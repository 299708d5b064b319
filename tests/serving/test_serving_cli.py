"""The CLI: --help stays light, build/pin from the command line, errors exit 2 with the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from serving.manifest import read_manifest

HEAVY = ("numpy", "tritonclient", "onnxruntime", "torch", "transformers", "tokenizers", "grpc")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "serving", *args], capture_output=True, text=True, timeout=120
    )


def test_help_imports_no_heavy_library() -> None:
    code = (
        "import sys, runpy; sys.argv = ['serving', '--help']\n"
        "try:\n    runpy.run_module('serving', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("[]"), done.stdout
    for command in ("build", "serve", "infer", "check", "loadtest", "pin", "signal"):
        assert command in done.stdout


def test_build_and_pin_from_the_command_line(tiny_bundle: Path, tmp_path: Path) -> None:
    repo = tmp_path / "models"
    done = cli("build", str(tiny_bundle), str(repo), "--backend", "onnxruntime")
    assert done.returncode == 0, done.stderr
    assert "version 1 (onnxruntime, fp32)" in done.stdout
    assert cli("build", str(tiny_bundle), str(repo), "--precision", "int8").returncode == 0
    assert sorted(read_manifest(repo)["versions"]) == ["1", "2"]
    assert cli("pin", str(repo), "1").returncode == 0
    assert read_manifest(repo)["pinned"] == 1
    refused = cli("build", str(tiny_bundle), str(repo), "--version", "2")
    assert refused.returncode == 2 and "--version 3" in refused.stderr


def test_bad_inputs_exit_2_with_the_fix(tmp_path: Path) -> None:
    missing = cli("build", str(tmp_path / "nope"), str(tmp_path / "models"))
    assert missing.returncode == 2 and "is not a folder: pass the export bundle" in missing.stderr
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "metadata.json").write_text(json.dumps({"format_version": 1}))
    half = cli("build", str(tmp_path / "half"), str(tmp_path / "models"))
    assert half.returncode == 2 and "missing" in half.stderr
    no_repo = cli("serve", str(tmp_path / "absent"))
    assert no_repo.returncode == 2 and "run `python -m serving build` first" in no_repo.stderr
    assert cli("pin", str(tmp_path / "absent"), "x").returncode == 2
    assert cli("loadtest", "--concurrency", "0", "--out", "x.json").returncode == 2
    no_warmup = cli("loadtest", "--warmup-requests", "-1", "--out", "x.json")
    assert no_warmup.returncode == 2 and "must be >= 0 (0 turns it off)" in no_warmup.stderr
