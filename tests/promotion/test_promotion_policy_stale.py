"""The policy-clean gate judges the report of the plan being deployed: a report made from an earlier plan (infra
edited and `make plan` run again, `make policy` forgotten) passed the gate on stale evidence.

The real path: the dev stack's plan rendered by the infra program (`python -m infra.plan`), analysed by the real
policy pack (`python -m policies.analyze`), then judged by `python -m promotion evaluate`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from promotion import promote as ops
from promotion.config import load_config
from promotion.evidence import load_evidence
from promotion.store import ModelStore

REPO = Path(__file__).resolve().parents[2]


def _module(*args: str, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def _gate(evidence_files: dict[str, Path], report: Path, tmp_path: Path) -> tuple[str, str]:
    evidence = load_evidence(
        str(evidence_files["candidate"]), loadtest=str(evidence_files["loadtest"]), policy_report=str(report),
        build_record=str(evidence_files["build_record"]),
    )  # fmt: skip
    record = ops.evaluate(evidence, load_config(), "dev", store=ModelStore(str(tmp_path / "store"), "m"))
    (gate,) = [g for g in record["gates"] if g["name"] == "policy-clean"]
    return gate["status"], gate["detail"]


@pytest.mark.integration
def test_a_report_of_an_earlier_plan_fails_the_gate(evidence_files: dict[str, Path], tmp_path: Path) -> None:
    _module("infra.plan", "--stack", "dev", "--out", str(tmp_path / "plan"), cwd=REPO)
    _module(
        "policies.analyze", str(tmp_path / "plan" / "dev.json"), "--out", str(tmp_path / "policy"), cwd=REPO
    )
    report = tmp_path / "policy" / "dev.json"
    assert _gate(evidence_files, report, tmp_path)[0] == "pass"

    plan = json.loads((tmp_path / "plan" / "dev.json").read_text())
    plan["region"] = (
        "eu-west-1"  # what a re-render after an infra change looks like to the report: other bytes
    )
    (tmp_path / "plan" / "dev.json").write_text(json.dumps(plan))
    status, detail = _gate(evidence_files, report, tmp_path)
    assert status == "fail" and "stale" in detail and "make policy" in detail, detail

    (tmp_path / "plan" / "dev.json").unlink()  # the plan is not on this machine: nothing to compare it with
    assert _gate(evidence_files, report, tmp_path)[0] == "pass"
