"""Waivers: every entry validated once (rule names, stacks, patterns, dates, one-year limit), matched by
stack and resource, and expired or unused ones reported. The pack and the gate share this code."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import pytest

from policies import waivers
from policies.rules import ALL_RULES

TODAY = dt.date(2026, 12, 2)
RULES = [r.name for r in ALL_RULES]
REPO = Path(__file__).resolve().parents[2]


def entry(**change: Any) -> dict[str, Any]:
    base = {
        "rule": "network-no-open-ingress",
        "stacks": ["prod"],
        "resources": ["mlp-prod-bastion-*"],
        "justification": "bastion behind the corporate VPN",
        "approver": "ENS officer <ens@example.eu>",
        "expires": "2027-06-30",
    }
    base.update(change)
    return base


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rule": "no-such-rule"}, "no rule named 'no-such-rule'"),
        ({"resources": "*"}, "matches everything"),
        ({"resources": ["a", "**"]}, "matches everything"),
        ({"stacks": ["*"]}, "'\\*' is refused"),
        ({"expires": "2027-13-01"}, "is not a date; write YYYY-MM-DD"),
        ({"expires": "next year"}, "is not a date"),
        ({"expires": "2028-01-01"}, "more than one year after 2026-12-02"),
        ({"scope": "all"}, "unknown field"),
        ({"stacks": []}, "lacks \\['stacks'\\]"),
    ],
)
def test_malformed_waiver_is_a_clear_error(change: dict[str, Any], message: str) -> None:
    with pytest.raises(waivers.WaiverError, match=message):
        waivers.parse([entry(**change)], rules=RULES, today=TODAY)


def test_waiver_matches_only_its_stacks_and_names() -> None:
    (w,) = waivers.parse([entry()], rules=RULES, today=TODAY)
    urn = "urn:pulumi:prod::eu-ml-platform::aws:ec2/securityGroup:SecurityGroup::mlp-prod-bastion-sg"
    assert w.matches("network-no-open-ingress", urn, "prod")
    assert not w.matches("network-no-open-ingress", urn, "staging")
    assert not w.matches("node-no-public-ip", urn, "prod")
    assert not w.matches("network-no-open-ingress", urn.replace("bastion", "nodes"), "prod")


def test_expired_and_unused_waivers_are_listed() -> None:
    ws = waivers.parse(
        [entry(expires="2026-11-30"), entry(rule="node-no-public-ip"), entry(resources=["used-*"])],
        rules=RULES,
        today=TODAY,
    )
    finding = {"policy": "network-no-open-ingress", "urn": "urn:x::used-sg"}
    kept, waived = waivers.split([finding], ws, TODAY, "prod")
    assert kept == [] and waived[0]["waiver"]["id"] == 3
    status = waivers.status(ws, waived, TODAY)
    assert [w["id"] for w in status["expired"]] == [1]
    assert [w["id"] for w in status["unused"]] == [2]


def test_committed_waivers_are_valid_today() -> None:
    waivers.load(rules=RULES, today=dt.date.today())


def test_cli_exits_2_on_a_waiver_naming_no_rule(tmp_path: Path) -> None:
    plan = tmp_path / "dev.json"
    plan.write_text(json.dumps(fx.aws_stack()))
    bad = tmp_path / "waivers.yaml"
    bad.write_text(json.dumps({"waivers": [entry(rule="s3-typo", expires=str(dt.date.today()))]}))
    proc = subprocess.run(
        [sys.executable, "-m", "policies.analyze", str(plan), "--out", str(tmp_path), "--waivers", str(bad)],
        cwd=REPO,
        env={**os.environ, "POLICY_PACK_PYTHON": "/nonexistent"},  # validation comes before the pack
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no rule named 's3-typo'" in proc.stderr
