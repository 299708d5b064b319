"""The pack's stderr is what tells a user why the pack failed. It is kept in a temporary file with no name (so
no kill of the runner can leave it behind); these check the runner still reads it back into its error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import policy_fixtures as fx
import pytest

from policies.analyze import PACK_DIR, PackError, analyze_plan, plan_from_dict

REPO = Path(__file__).resolve().parents[2]


def test_a_pack_that_cannot_start_shows_its_stderr_and_leaves_no_file(tmp_path: Path) -> None:
    """A broken pack virtualenv: the pack's own words (here: a missing module) are the message of exit 3."""
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'pulumi_policy' (pack stderr)\" >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    plan = tmp_path / "dev.json"
    plan.write_text(json.dumps(fx.aws_stack()))
    proc = subprocess.run(
        [sys.executable, "-m", "policies.analyze", str(plan), "--out", str(tmp_path / "out")],
        cwd=REPO,
        env={**os.environ, "POLICY_PACK_PYTHON": str(fake), "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "did not print its port" in proc.stderr
    assert "No module named 'pulumi_policy' (pack stderr)" in proc.stderr
    assert not list(temp.iterdir()), "the runner left files in its temp folder"


@pytest.mark.integration
def test_a_pack_that_fails_mid_session_shows_its_stderr(tmp_path: Path, pack_python: Path) -> None:
    """A pack that crashes while answering Analyze: the runner's error carries what the pack wrote to stderr
    (read back from the unnamed file while the pack is still running)."""
    pack = tmp_path / "pack"
    shutil.copytree(PACK_DIR, pack, ignore=shutil.ignore_patterns(".venv", "__pycache__", "*.pyc"))
    main = pack / "__main__.py"
    main.write_text(
        main.read_text().replace(
            "\nserve()\n",
            "\nimport pulumi_policy.policy as _sdk\n"
            "def _crash(self, request, context):\n"
            "    print('PACK-STDERR: the rule crashed on', request.urn, file=sys.stderr, flush=True)\n"
            "    raise RuntimeError('rule crashed')\n"
            "_sdk._PolicyAnalyzerServicer.Analyze = _crash\n"
            "serve()\n",
        )
    )
    assert "_crash" in main.read_text()
    plan = plan_from_dict(fx.aws_stack(), tmp_path / "dev.json")
    with pytest.raises(PackError) as failed:
        analyze_plan(plan, python=pack_python, pack_dir=pack)
    assert "Analyzer RPC failed" in str(failed.value)
    assert f"PACK-STDERR: the rule crashed on {plan.resources[0]['urn']}" in str(failed.value)
