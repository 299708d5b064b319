"""`make lint`'s ruff half inside `make test`: the landing CI runs only the tests, so a file that `ruff format
--check` refuses (as one line of a pipeline test was) landed and then failed the pull-request lint job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["check", "format"])
def test_ruff_accepts_the_repository(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
