"""The policy-clean gate judged a report by what it said when it was written: a mandatory finding listed as
`waived` passed the gate after its waiver had ended (the reviewer signed off until that day), or after the
waiver had been revoked in policies/waivers.yaml.

The real path: the dev stack's plan rendered by the infra program with one mandatory finding (key rotation off),
a waiver for it, the real policy pack (`python -m policies.analyze`), then `python -m promotion evaluate`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml
from promotion_fixtures import policy_gate_line, run_module

from promotion.evidence import utc_today

REPO = Path(__file__).resolve().parents[2]
KEY = "mlp-dev-key-key"


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev plan with its key's rotation off: a mandatory kms-key-rotation finding on KEY."""
    folder = tmp_path_factory.mktemp("plan")
    done = run_module("infra.plan", "--stack", "dev", "--out", str(folder))
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((folder / "dev.json").read_text())
    (key,) = [r for r in doc["resources"] if r["type"] == "aws:kms/key:Key" and r["name"] == KEY]
    key["inputs"]["enableKeyRotation"] = False
    (folder / "dev.json").write_text(json.dumps(doc))
    return folder / "dev.json"


def _analyze(plan: Path, tmp_path: Path, expires: dt.date, today: dt.date) -> Path:
    waivers = tmp_path / "waivers.yaml"
    waiver = {
        "rule": "kms-key-rotation", "finding": "violation", "stacks": ["dev"], "resources": [KEY],
        "justification": "rotated by the replacement job", "approver": "ENS officer <ens@example.eu>",
        "expires": str(expires),
    }  # fmt: skip
    committed = yaml.safe_load((REPO / "policies" / "waivers.yaml").read_text())["waivers"]
    # The committed waivers too: they accept the real plan's undetermined checks.
    waivers.write_text(yaml.safe_dump({"waivers": [*committed, waiver]}, sort_keys=False))
    out = tmp_path / "policy"
    done = run_module(
        "policies.analyze", str(plan), "--out", str(out), "--waivers", str(waivers), "--today", str(today)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((out / "dev.json").read_text())
    assert ("kms-key-rotation", "mandatory") in [(v["policy"], v["enforcement"]) for v in report["waived"]]
    return out / "dev.json"


@pytest.mark.integration
def test_a_waiver_that_ended_after_the_report_fails_the_gate(
    plan: Path, evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    today = utc_today()  # the day `promotion` judges on, whatever this machine's zone
    report = _analyze(
        plan, tmp_path, expires=today - dt.timedelta(days=1), today=today - dt.timedelta(days=2)
    )
    line = policy_gate_line(evidence_files, report, tmp_path / "store")
    assert "FAIL" in line and f"ended on {today - dt.timedelta(days=1)}" in line, line
    assert "kms-key-rotation" in line and "make policy" in line, line


@pytest.mark.integration
def test_a_waiver_revoked_after_the_report_makes_it_stale(
    plan: Path, evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    today = utc_today()  # the day `promotion` judges on, whatever this machine's zone
    report = _analyze(plan, tmp_path, expires=today + dt.timedelta(days=30), today=today)
    line = policy_gate_line(evidence_files, report, tmp_path / "store")
    assert "PASS" in line and "not checked" not in line, line

    waivers = yaml.safe_load((tmp_path / "waivers.yaml").read_text())
    waivers["waivers"] = [w for w in waivers["waivers"] if w["resources"] != [KEY]]  # the reviewer revokes it
    (tmp_path / "waivers.yaml").write_text(yaml.safe_dump(waivers, sort_keys=False))
    line = policy_gate_line(evidence_files, report, tmp_path / "store")
    assert "FAIL" in line and "stale" in line and "waivers_sha256 differs" in line, line
    assert "make policy" in line, line


def test_a_report_from_before_waivers_were_recorded_says_so(evidence_files: dict[str, Path]) -> None:
    from promotion import gates
    from promotion.config import load_config
    from promotion.evidence import load_evidence

    report = json.loads(evidence_files["policy_report"].read_text())
    assert "waivers_sha256" not in report
    evidence = load_evidence(
        str(evidence_files["candidate"]), policy_report=str(evidence_files["policy_report"])
    )
    result = gates.policy_clean(
        report, load_config().environment("dev"), waivers_now=evidence.policy_waivers_now
    )
    assert result.status == "pass" and "not checked against current waivers" in result.detail, result
