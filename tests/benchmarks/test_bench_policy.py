"""`python -m benchmarks.policy` measures the pack over the plans `make policy` would analyse: a copied or renamed
plan, or two plans of one stack, were measured as a second entry of one stack (the other stack not at all), the
gate's checks skipped; they refuse the run as the gate does, before the pack starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _plan(stack: str) -> str:
    return json.dumps(
        {"stack": stack, "cloud": "aws", "environment": stack, "region": "eu-west-1", "resources": []}
    )


@pytest.mark.parametrize(
    ("files", "message"),
    [
        # prod.json copied from staging.json: Pulumi.prod.yaml makes prod a stack of the project.
        (
            {"dev.json": "dev", "prod.json": "staging"},
            "prod.json holds the plan of stack 'staging', not of stack 'prod'",
        ),
        ({"a.json": "dev", "b.json": "dev"}, "a.json are both plans of stack 'dev'"),
    ],
)
def test_the_benchmark_refuses_the_plans_the_gate_refuses(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    plans, out = tmp_path / "plans", tmp_path / "bench" / "policy.json"
    plans.mkdir()
    for name, stack in files.items():
        (plans / name).write_text(_plan(stack))
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.policy", "--plans", str(plans), "--out", str(out)],
        cwd=ROOT,
        # A pack that cannot start: the refusal must come before it (the old run got that far: exit 1).
        env={**os.environ, "POLICY_PACK_PYTHON": str(tmp_path / "no-such-python")},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not out.parent.exists()
