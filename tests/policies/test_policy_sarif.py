"""reports/policy.sarif as GitHub code scanning reads it: valid against the SARIF 2.1.0 JSON schema
(vendored, policies/schemas/README.md), one physical location with a region per result, pointing at a
tracked file of the repository (the program line declaring the resource), `security-severity` on rules."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from policies import report
from policies.writers.sarif import ignored

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "policies/schemas/sarif-2.1.0.json"
MULTITOOL = REPO / "tools/npm/node_modules/.bin/sarif-multitool-linux"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sarif(real_plans: dict[str, Any], tmp_path_factory: pytest.TempPathFactory, pack_python: Path) -> Path:
    """The SARIF of the real stacks with one finding planted per stack kind (resource and stack-wide)."""
    root = tmp_path_factory.mktemp("sarif")
    plans = root / "plans"
    plans.mkdir()
    for stack, plan in real_plans.items():
        if stack not in ("dev", "azure-dev"):  # one AWS and one stack-finding-free stack keep it short
            continue
        plan = json.loads(json.dumps(plan))
        if stack == "dev":  # a resource finding: the bucket's key becomes the AWS-managed one
            for r in plan["resources"]:
                if r["type"].startswith("aws:s3/bucketServerSideEncryptionConfiguration"):
                    r["inputs"]["rules"][0]["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"] = (
                        "alias/aws/s3"
                    )
        (plans / f"{stack}.json").write_text(json.dumps(plan))
    report.build(plans, root / "out", with_checkov=False, python=pack_python)
    return root / "out" / "policy.sarif"


def test_sarif_validates_against_the_2_1_0_schema(sarif: Path) -> None:
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(json.loads(sarif.read_text())), key=lambda e: list(e.path))
    assert [f"{list(e.path)}: {e.message}" for e in errors[:5]] == []


def test_schema_rejects_a_broken_log() -> None:
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"version": "2.1.0", "runs": [{"results": []}]}, schema)  # a run needs its tool


def test_each_result_points_at_a_tracked_program_line(sarif: Path) -> None:
    doc = json.loads(sarif.read_text())
    results = doc["runs"][0]["results"]
    assert results, "the planted findings must be reported"
    uris = set()
    for r in results:
        assert len(r["locations"]) == 1  # one location per resource
        phys = r["locations"][0]["physicalLocation"]
        assert phys["region"]["startLine"] >= 1
        uris.add(phys["artifactLocation"]["uri"])
    assert not {u for u in uris if u.startswith(("reports/", "/"))}
    assert ignored(uris) == set(), "no location may point into a git-ignored path"
    assert all((REPO / u).is_file() for u in uris)
    planted = [r for r in results if r["ruleId"] == "cmk-key-reference"]
    assert planted and all(
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].startswith("infra/aws/")
        for r in planted
    )


def test_each_finding_has_its_own_fingerprint(sarif: Path) -> None:
    """upload-sarif fingerprints a result by its rule and the hash of its source line: the same rule on one
    line in several stacks (one shared program) would become one GitHub alert. Each result names its own."""
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    prints = [r["partialFingerprints"]["policyFinding/v1"] for r in results]
    assert results and len(set(prints)) == len(prints)


def test_rules_carry_security_severity(sarif: Path) -> None:
    rules = json.loads(sarif.read_text())["runs"][0]["tool"]["driver"]["rules"]
    assert all(0 < float(r["properties"]["security-severity"]) <= 10 for r in rules)


@pytest.mark.skipif(
    not MULTITOOL.exists(), reason="sarif-multitool not installed (make setup installs tools/npm)"
)
def test_sarif_multitool_accepts_it_for_github(sarif: Path, tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    out = tmp_path / "validation.sarif"
    # Gh: GitHub's ingestion rules; Sarif: the spec's own (SARIF1001: a rule's name must differ from its id).
    proc = subprocess.run(
        [str(MULTITOOL), "validate", str(sarif), "--output", str(out), "--rule-kind", "Gh", "Sarif"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert out.exists(), proc.stdout + proc.stderr
    errors = [
        res
        for run in json.loads(out.read_text())["runs"]
        for res in run.get("results", [])
        if res.get("level", "warning") in ("error", "warning")  # a result without a level is a warning
    ]
    assert errors == [], [e["message"] for e in errors][:5]
