"""The policy-clean gate's staleness check finds the plan the report names wherever promotion runs.

`make policy` records the plan as it was given (`reports/plan/dev.json`, relative to the folder it ran in) and
writes the report under that folder. `python -m promotion` run from another folder (a CI step with its own
working directory, a person in their home) looked for the plan relative to itself, found none, and passed the gate
on a stale report without saying it had not compared. The real path: the infra program renders the plan, the real
policy pack analyses it with relative paths, the real CLI judges it from elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from promotion_fixtures import policy_gate_line, run_module

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_a_stale_report_is_caught_from_another_folder(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for args in (("infra.plan", "--stack", "dev", "--out", "reports/plan"),
                 ("policies.analyze", "reports/plan/dev.json", "--out", "reports/policy")):  # fmt: skip
        done = run_module(*args, cwd=checkout)
        assert done.returncode == 0, done.stdout + done.stderr
    report = checkout / "reports" / "policy" / "dev.json"
    assert json.loads(report.read_text())["plan"] == "reports/plan/dev.json"  # relative to `checkout`
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = tmp_path / "store"

    fresh = policy_gate_line(evidence_files, report, store, elsewhere)
    assert "PASS" in fresh and "not checked" not in fresh, fresh

    plan = checkout / "reports" / "plan" / "dev.json"
    plan.write_text(plan.read_text().replace('"dev"', '"dev" ', 1))  # re-rendered after an infra change
    stale = policy_gate_line(evidence_files, report, store, elsewhere)
    assert "FAIL" in stale and "stale" in stale and "make policy" in stale, stale

    plan.unlink()  # nowhere on this machine: judged as it is, and the detail says the plan was not compared
    missing = policy_gate_line(evidence_files, report, store, elsewhere)
    assert "PASS" in missing and "not checked against the current plan" in missing, missing
    assert "reports/plan/dev.json is not on this machine" in missing and str(checkout) in missing, missing


def test_a_report_without_plan_fields_says_it_was_not_compared(evidence_files: dict[str, Path]) -> None:
    from promotion.evidence import load_evidence

    evidence = load_evidence(
        str(evidence_files["candidate"]), policy_report=str(evidence_files["policy_report"])
    )
    assert evidence.policy_plan_sha256 is None
    assert evidence.policy_plan_note and "names no plan" in evidence.policy_plan_note


@pytest.mark.integration
def test_a_plan_named_like_its_report_is_not_taken_for_the_report(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    """`python -m policies.analyze dev.json --out ../policy` run in reports/plan records the plan as `dev.json`:
    looked up from the report's own folder, that path is the report itself, which the gate hashed as "the plan"
    and failed as stale. The result's absolute `plan_file` comes first, and the report is never its own plan."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    done = run_module("infra.plan", "--stack", "dev", "--out", "reports/plan", cwd=checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    plans = checkout / "reports" / "plan"
    done = run_module("policies.analyze", "dev.json", "--out", "../policy", cwd=plans)
    assert done.returncode == 0, done.stdout + done.stderr
    report = checkout / "reports" / "policy" / "dev.json"
    assert json.loads(report.read_text())["plan"] == "dev.json"

    fresh = policy_gate_line(evidence_files, report, tmp_path / "store", tmp_path)
    assert "PASS" in fresh and "not checked" not in fresh, fresh

    doc = json.loads(report.read_text())
    del doc["plan_file"]  # a result written before plan_file: the report is still never read as its plan
    report.write_text(json.dumps(doc))
    older = policy_gate_line(evidence_files, report, tmp_path / "store", tmp_path)
    assert "stale" not in older, older
