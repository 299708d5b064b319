"""The policy CLIs as a user runs them: a subprocess of this interpreter, in the repository root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import yaml

REPO = Path(__file__).resolve().parents[2]


def run_cli(
    module: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
    timeout: float = 180,
    **kwargs: Any,
) -> subprocess.CompletedProcess[str]:
    """`python -m <module> <args>`; `env`: set over this process's environment (POLICY_PACK_PYTHON: the pack's
    interpreter). The repository stays importable from any `cwd`."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        **kwargs,
    )


def analyze_cli(
    tmp_path: Path,
    waivers_doc: Any,
    *,
    plan: Mapping[str, Any] | None = None,
    plan_name: str = "dev.json",
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """`python -m policies.analyze PLAN --out tmp_path/out --waivers tmp_path/waivers.yaml` on `plan` (default: a
    dev plan) with these waivers. Without POLICY_PACK_PYTHON in `env` the pack cannot start: enough for what is
    validated before it (the waivers are)."""
    plan_path, waivers_path = tmp_path / plan_name, tmp_path / "waivers.yaml"
    plan_path.write_text(json.dumps(fx.aws_stack() if plan is None else plan))
    waivers_path.write_text(yaml.safe_dump(waivers_doc, sort_keys=False))
    args = (str(plan_path), "--out", str(tmp_path / "out"), "--waivers", str(waivers_path))
    return run_cli(
        "policies.analyze", *args, env={"POLICY_PACK_PYTHON": "/nonexistent", **(env or {})}, timeout=timeout
    )
