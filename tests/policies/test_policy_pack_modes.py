"""The pack's two modes over the real Analyzer protocol, and the pack as it would be published.

- The offline gate (`python -m policies.analyze`): a mandatory rule that cannot decide fails closed
  (exit 1, listed as UNDETERMINED), and the environment table makes staging/prod rules mandatory.
- As under `pulumi preview --policy-pack` (no gate switch, PULUMI_DRY_RUN=true), run from a copy of the
  pack directory made the way `pulumi policy publish` packs it (the folder alone, under another name,
  outside the repository): undetermined checks and waived findings come back advisory, with the
  waivers the copy carries; a non-waived violation still blocks.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import pytest
import yaml
from policy_cli import analyze_cli

from policies.analyze import PACK_DIR, analyze_plan, plan_from_dict

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SG = "aws:ec2/securityGroup:SecurityGroup"
OPEN = {"ingress": [{"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrBlocks": ["0.0.0.0/0"]}]}
# What `pulumi policy publish` leaves out of the pack archive here: the virtualenv and caches.
NOT_PUBLISHED = shutil.ignore_patterns(".venv", "__pycache__", "*.pyc")


def _mutant(stack: str, environment: str) -> dict[str, Any]:
    plan = fx.aws_stack(stack, environment)
    # Built from ARNs unknown at preview: s3-bucket-tls-only (mandatory) cannot decide.
    fx.find(plan, "aws:s3/bucketPolicy:BucketPolicy", "data-policy")["inputs"]["policy"] = fx.UNKNOWN
    # registry-immutable-scanned: advisory in dev, mandatory in staging/prod (policies/enforcement.yaml).
    fx.find(plan, "aws:ecr/repository:Repository", "serving")["inputs"]["imageTagMutability"] = "MUTABLE"
    prov = fx.find(plan, "pulumi:providers:aws", "aws-eu")["urn"] + "::" + fx.UNKNOWN
    for name in ("waived-sg", "open-sg"):
        plan["resources"].append(fx.res(stack, SG, name, OPEN, provider=prov))
    return plan


def test_offline_gate_fails_closed_on_undetermined(tmp_path: Path, pack_python: Path) -> None:
    proc = analyze_cli(
        tmp_path,
        {"waivers": []},  # the gate's own waivers: none, so both SGs count
        plan=_mutant("prod", "prod"),
        plan_name="prod.json",
        env={"POLICY_PACK_PYTHON": str(pack_python)},
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "UNDETERMINED s3-bucket-tls-only" in proc.stdout
    doc = json.loads((tmp_path / "out" / "prod.json").read_text())
    undetermined = {
        (v["policy"], v["urn"].rsplit("::", 1)[-1], v["enforcement"]) for v in doc["undetermined"]
    }
    assert undetermined == {
        ("s3-bucket-tls-only", "data", "mandatory"),
        ("s3-no-public-acl-or-policy", "data-policy", "mandatory"),
    }
    decided = {
        (v["policy"], (v["urn"] or "").rsplit("::", 1)[-1], v["enforcement"])
        for v in doc["violations"]
        if not v["undetermined"]
    }
    assert {v["policy"] for v in doc["violations"] if v["undetermined"]} == {
        "s3-bucket-tls-only",
        "s3-no-public-acl-or-policy",
    }
    assert decided == {
        ("registry-immutable-scanned", "serving", "mandatory"),  # prod: the environment table
        ("network-no-open-ingress", "waived-sg", "mandatory"),
        ("network-no-open-ingress", "open-sg", "mandatory"),
    }


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pack folder alone, renamed and outside the repository, with its own waivers file."""
    target = tmp_path_factory.mktemp("publish") / "eu-ml-platform-policies-0.2.0"
    shutil.copytree(PACK_DIR, target, ignore=NOT_PUBLISHED)
    (target / "waivers.yaml").write_text(
        yaml.safe_dump(
            {
                "waivers": [
                    {
                        "rule": "network-no-open-ingress",
                        "finding": "violation",
                        "stacks": ["dev"],
                        "resources": ["waived-sg"],
                        "justification": "bastion during the migration, source restricted at the edge",
                        "approver": "ENS officer <ens@example.eu>",
                        "expires": (dt.date.today() + dt.timedelta(days=30)).isoformat(),
                    },
                    # Written for a value unknown at preview: open-sg's known 0.0.0.0/0 must still block.
                    {
                        "rule": "network-no-open-ingress",
                        "finding": "undetermined",
                        "stacks": ["dev"],
                        "resources": ["open-sg"],
                        "justification": "source CIDR comes from the NAT gateway, unknown at preview",
                        "approver": "ENS officer <ens@example.eu>",
                        "expires": (dt.date.today() + dt.timedelta(days=30)).isoformat(),
                    },
                ]
            }
        )
    )
    return target


def test_published_copy_has_no_repository_imports(published: Path) -> None:
    """No module of the pack imports another top-level package of this repository."""
    repo_packages = {p.name for p in REPO.iterdir() if (p / "__init__.py").exists()} - {"policies"}
    offenders = []
    for path in published.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in repo_packages]
    assert repo_packages and offenders == []


def test_published_pack_under_the_cli_applies_waivers_and_relaxes_preview(
    published: Path, pack_python: Path
) -> None:
    result = analyze_plan(
        plan_from_dict(_mutant("dev", "dev")), python=pack_python, pack_dir=published, as_cli=True
    )
    assert result.pack["name"] == "eu-ml-platform-policies"
    found = {
        (v["policy"], (v["urn"] or "").rsplit("::", 1)[-1], v["enforcement"]): v["message"]
        for v in result.violations
    }
    assert set(found) == {
        # unknown at preview: the update-time run decides; at preview it is advisory
        ("s3-bucket-tls-only", "data", "advisory"),
        ("s3-no-public-acl-or-policy", "data-policy", "advisory"),
        # dev keeps the environment-table rules advisory
        ("registry-immutable-scanned", "serving", "advisory"),
        # the copy's waiver applies under the CLI too: reported, never hidden, but not blocking
        ("network-no-open-ingress", "waived-sg", "advisory"),
        ("network-no-open-ingress", "open-sg", "mandatory"),
    }
    assert found[("s3-bucket-tls-only", "data", "advisory")].startswith("undetermined: ")
    waived = found[("network-no-open-ingress", "waived-sg", "advisory")]
    assert waived.startswith("waived (waiver #1 by ENS officer <ens@example.eu>, until ")
    assert "0.0.0.0/0" in found[("network-no-open-ingress", "open-sg", "mandatory")]


def test_update_time_run_under_the_cli_blocks_on_what_is_still_unknown(
    published: Path, pack_python: Path
) -> None:
    """`pulumi up` sends known values; a value still unknown then is a real gap: the policy's own level."""
    plan = plan_from_dict(_mutant("dev", "dev"))
    result = analyze_plan(plan, python=pack_python, pack_dir=published, as_cli=True, dry_run=False)
    tls = [v for v in result.violations if v["policy"] == "s3-bucket-tls-only"]
    assert [(v["enforcement"], v["undetermined"]) for v in tls] == [("mandatory", True)]
