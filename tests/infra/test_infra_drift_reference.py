"""CI's `--drift-reference` (.github/scripts/drift-reference.sh, `python -m infra.drift_reference`): from a stack's
`bucket_uris` output, exactly the location its drift CronJob reads, on every cloud; a stack without outputs gives
none (the workflow promotes without it and warns); an output without a models bucket is exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from infra_fixtures import STACKS, Plan

from infra import drift_reference

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".github/scripts/drift-reference.sh"


def cronjob_reference(plan: Plan) -> str:
    container = plan.one("kubernetes:batch/v1:CronJob", "-monitoring-drift")["inputs"]["spec"]["jobTemplate"]
    args = container["spec"]["template"]["spec"]["containers"][0]["args"]
    return str(args[args.index("--reference") + 1])


@pytest.mark.parametrize("stack", STACKS)
def test_the_location_is_what_the_drift_cronjob_reads(plans: dict[str, Plan], stack: str) -> None:
    assert drift_reference.location(plans[stack]["outputs"]["bucket_uris"]) == cronjob_reference(plans[stack])


def fake_pulumi(tmp_path: Path, body: str) -> dict[str, str]:
    """A `pulumi` on PATH that answers `stack output bucket_uris --json --stack S` as the CLI does (this machine
    has no Pulumi CLI) and records its arguments."""
    exe = tmp_path / "bin" / "pulumi"
    exe.parent.mkdir(parents=True)
    exe.write_text(f'#!/usr/bin/env bash\necho "$*" > {tmp_path}/args\n{body}\n')
    exe.chmod(0o755)
    python_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{exe.parent}:{python_dir}:{os.environ['PATH']}"}


def run_script(env: dict[str, str], stack: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), stack], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_script_prints_the_stacks_location_or_nothing_before_its_first_up(
    plans: dict[str, Plan], tmp_path: Path
) -> None:
    uris = json.dumps(plans["azure-dev"]["outputs"]["bucket_uris"], indent=2)
    out = run_script(fake_pulumi(tmp_path, f"cat <<'JSON'\n{uris}\nJSON"), "azure-dev")
    assert (out.returncode, out.stdout) == (0, cronjob_reference(plans["azure-dev"]) + "\n"), out.stderr
    assert (tmp_path / "args").read_text().split() == [
        "stack",
        "output",
        "bucket_uris",
        "--json",
        "--stack",
        "azure-dev",
    ]

    missing = run_script(
        fake_pulumi(
            tmp_path / "new", "echo 'error: current stack does not have output property' >&2; exit 255"
        ),
        "staging",
    )
    assert (missing.returncode, missing.stdout) == (0, "")
    assert "stack staging has no bucket_uris output" in missing.stderr


def test_an_output_without_a_models_bucket_is_exit_2_saying_what_to_pipe_in(tmp_path: Path) -> None:
    out = run_script(fake_pulumi(tmp_path, """echo '{"logs": "s3://acme-mlp-dev-logs"}'"""), "dev")
    assert out.returncode == 2 and out.stdout == ""
    assert "no models bucket" in out.stderr and "pulumi stack output bucket_uris --json" in out.stderr
