"""The compliance report: every framework appears, waived findings show as waived, expired waivers
do not apply; SARIF and JUnit are well-formed. Also the Checkov second opinion."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import policy_fixtures as fx
import pytest
import yaml

from policies import checkov, report
from policies.frameworks import FRAMEWORK_KEYS, load
from policies.rules import ALL_RULES
from policies.waivers import WaiverError, parse

TODAY = dt.date(2026, 12, 2)


def test_mapping_covers_every_rule_and_only_them() -> None:
    mapping = load()
    assert set(mapping.rules) == {r.name for r in ALL_RULES}
    for rule in ALL_RULES:
        assert any(mapping.references(rule.name, k) for k in ("gdpr", "ens", "nis2", "iso27001")), rule.name
        assert mapping.primary(rule.name).name


def test_waiver_needs_every_field() -> None:
    with pytest.raises(WaiverError, match="lacks \\['finding', 'stacks', 'approver'\\]"):
        parse([{"rule": "x", "resources": "a", "justification": "j", "expires": "2027-01-01"}])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, pack_python: Path) -> tuple[report.Report, Path]:
    root = tmp_path_factory.mktemp("report")
    plans = root / "plans"
    plans.mkdir()
    aws = fx.aws_stack()
    fx.find(aws, "aws:kms/key:Key", "data-key")["inputs"]["enableKeyRotation"] = False  # waived below
    fx.find(aws, "aws:ecr/repository:Repository", "serving")["inputs"]["imageTagMutability"] = (
        "MUTABLE"  # expired waiver
    )
    (plans / "dev.json").write_text(json.dumps(aws))
    (plans / "gcp-dev.json").write_text(json.dumps(fx.gcp_stack()))
    waivers = root / "waivers.yaml"
    waivers.write_text(
        yaml.safe_dump(
            {
                "waivers": [
                    {
                        "rule": "kms-key-rotation",
                        "finding": "violation",
                        "stacks": ["dev"],
                        "resources": "data-key",
                        "justification": "key replaced by the HSM-backed key in Q1",
                        "approver": "DPD <dpd@example.eu>",
                        "expires": "2027-01-31",
                    },
                    {
                        "rule": "registry-immutable-scanned",
                        "finding": "violation",
                        "stacks": ["dev"],
                        "resources": "*::aws:ecr/repository:Repository::serving",
                        "justification": "migration window",
                        "approver": "ENS officer <ens@example.eu>",
                        "expires": "2026-11-30",
                    },
                ]
            }
        )
    )
    out = root / "reports"
    rep = report.build(plans, out, waivers_path=waivers, today=TODAY, with_checkov=False, python=pack_python)
    return rep, out


def test_the_summary_line_never_calls_a_skipped_checkov_clean(
    built: tuple[report.Report, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--no-checkov` (or a Checkov that could not run) printed "checkov: 0 failed check(s)": a clean scan that
    never happened, in the line a reviewer reads."""
    rep, out = built
    monkeypatch.setattr(report, "build", lambda *a, **k: rep)
    report.main(["--plans", str(out), "--out", str(out), "--no-checkov"])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("checkov:"))
    assert line == "checkov: Checkov was skipped (--no-checkov)."


@pytest.mark.integration
def test_reports_exist_and_name_every_framework(built: tuple[report.Report, Path]) -> None:
    rep, out = built
    for name in (
        "compliance.md",
        "compliance.html",
        "policy.sarif",
        "policy-junit.xml",
        "policy/dev.json",
        "policy/gcp-dev.json",
    ):
        assert (out / name).is_file(), name
    md = (out / "compliance.md").read_text()
    html = (out / "compliance.html").read_text()
    for key in FRAMEWORK_KEYS:
        name = rep.mapping.frameworks[key].name
        assert f"### {name}" in md and name in html
    for rule in ALL_RULES:  # a reviewer can trace each rule to its regulations
        assert f"### {rule.name}" in md and f"id='{rule.name}'" in html


@pytest.mark.integration
def test_waived_finding_shows_as_waived(built: tuple[report.Report, Path]) -> None:
    rep, out = built
    doc = json.loads((out / "policy/dev.json").read_text())
    waived = [v for v in doc["waived"] if v["policy"] == "kms-key-rotation"]
    assert len(waived) == 1 and waived[0]["waiver"]["approver"] == "DPD <dpd@example.eu>"
    assert not [v for v in doc["violations"] if v["policy"] == "kms-key-rotation"]
    md = (out / "compliance.md").read_text()
    assert "WAIVED data-key" in md and "expires 2027-01-31" in md
    sarif = json.loads((out / "policy.sarif").read_text())
    suppressed = [r for r in sarif["runs"][0]["results"] if r.get("suppressions")]
    assert [r["ruleId"] for r in suppressed] == ["kms-key-rotation"]
    assert rep.controls["kms-key-rotation"]["dev"].status == "waived"


@pytest.mark.integration
def test_expired_waiver_does_not_apply(built: tuple[report.Report, Path]) -> None:
    rep, out = built
    doc = json.loads((out / "policy/dev.json").read_text())
    assert [v["policy"] for v in doc["violations"]] == ["registry-immutable-scanned"]
    assert rep.controls["registry-immutable-scanned"]["dev"].status == "fail"
    assert "FAIL (advisory) serving" in (out / "compliance.md").read_text()


@pytest.mark.integration
def test_sarif_and_junit_are_well_formed(built: tuple[report.Report, Path]) -> None:
    _, out = built
    sarif = json.loads((out / "policy.sarif").read_text())
    assert sarif["version"] == "2.1.0"
    rules = {r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert rules == {r.name for r in ALL_RULES}
    assert all(r["ruleId"] in rules and r["locations"] for r in sarif["runs"][0]["results"])
    suites = ET.parse(out / "policy-junit.xml").getroot()
    assert {s.get("name") for s in suites} == {"policy.dev", "policy.gcp-dev"}
    # The only mandatory finding was waived, so no testcase fails.
    assert all(s.get("failures") == "0" for s in suites)


@pytest.mark.integration
def test_coverage_lists_every_declared_type(built: tuple[report.Report, Path]) -> None:
    rep, _ = built
    declared = {r["type"] for d in rep.docs for r in d["resources"]}
    assert set(rep.coverage) == declared
    assert rep.uncovered() == []


@pytest.mark.integration
def test_checkov_second_opinion(tmp_path: Path) -> None:
    try:
        checkov.checkov_binary()
    except checkov.CheckovError as err:
        pytest.skip(str(err))
    plan = fx.aws_stack()
    container = fx.find(plan, "kubernetes:apps/v1:Deployment", "sentiment")["inputs"]["spec"]["template"][
        "spec"
    ]["containers"][0]
    container["securityContext"] = {"privileged": True}
    path = checkov.render_manifests(plan, tmp_path)
    assert path is not None
    docs = list(yaml.safe_load_all(path.read_text()))
    assert docs[0]["apiVersion"] == "apps/v1" and docs[0]["spec"]["replicas"] == 2  # ints, not 2.0
    findings, summary = checkov.scan([path], ["kubernetes"])
    assert {"CKV_K8S_16", "CKV_K8S_20"} <= {f.check_id for f in findings}  # privileged; privilege escalation
    assert summary and all(re.fullmatch(r"\d+\.\d+\.\d+", s.version) for s in summary), summary


@pytest.mark.integration
def test_the_checkov_run_in_sarif_names_checkov_s_version(built: tuple[report.Report, Path]) -> None:
    """The Checkov run had no version: sarif-multitool warned (SARIF2005) and a reader could not tell which
    release's checks it was."""
    rep, _ = built
    summary = [checkov.Summary("kubernetes", 10, 0, 0, 0, "3.3.30")]
    with_checkov = dataclasses.replace(rep, checkov_summary=summary, checkov_findings=[])
    run = report.render_sarif(with_checkov)["runs"][1]
    assert run["tool"]["driver"]["name"] == "checkov" and run["tool"]["driver"]["version"] == "3.3.30"


@pytest.mark.integration
def test_report_is_signable(built: tuple[report.Report, Path]) -> None:
    """Provenance (commit, plan hashes, pack version, date), scope and limitations, ENS category,
    per-rule counts, per-reference evidence with titles, enforcement table, sign-off block."""
    import hashlib

    rep, out = built
    md = (out / "compliance.md").read_text()
    for d in rep.docs:
        assert hashlib.sha256(Path(d["plan"]).read_bytes()).hexdigest() in md
    assert f"Git commit: `{rep.commit}`" in md and rep.commit != "unknown"
    assert "version 0." in md and "## Scope and limitations" in md and "manual changes" in md
    assert "| dev | dev | BASICA |" in md  # the ENS category from policies/assessment.yaml
    assert "## Sign-off" in md and "ENS security officer" in md
    assert "| k8s-image-pinned | advisory | mandatory | mandatory |" in md  # enforcement by environment
    assert "| 8.24 | Use of cryptography |" in md  # titles, not only codes
    # 'pass' only where something was evaluated: prod-alert-routing is not applicable to dev stacks.
    alert_refs = [line for line in md.splitlines() if line.startswith("| 3 | Incident handling |")]
    assert alert_refs and "not evaluated" in alert_refs[0]
    kms = rep.controls["kms-key-rotation"]["dev"]
    assert kms.evaluated and kms.status == "waived" and not kms.undetermined
