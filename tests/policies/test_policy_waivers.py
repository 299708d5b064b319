"""Waivers: every entry validated once (rule names, stacks, patterns, dates, one-year limit), matched by
stack and resource, and expired or unused ones reported. The pack and the gate share this code."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import pytest
from policy_cli import analyze_cli, run_cli

from policies import waivers
from policies.rules import ALL_RULES

TODAY = dt.date(2026, 12, 2)
RULES = [r.name for r in ALL_RULES]


def entry(**change: Any) -> dict[str, Any]:
    base = {
        "rule": "network-no-open-ingress",
        "finding": "violation",
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
        ({"finding": "both"}, "write 'undetermined' .* or 'violation'"),
        ({"finding": None}, "lacks \\['finding'\\]"),
        # were accepted: a waiver nobody owns, or accepted for no stated reason
        ({"approver": " "}, "approver=' '; write it as text"),
        ({"approver": "TODO"}, "approver='TODO' names no one to ask; write 'Name <email>'"),
        ({"approver": ["DPD", "CISO"]}, "approver=\\['DPD', 'CISO'\\]; write it as text"),
        ({"justification": "  "}, "justification='  '; write it as text"),
    ],
)
def test_malformed_waiver_is_a_clear_error(change: dict[str, Any], message: str) -> None:
    with pytest.raises(waivers.WaiverError, match=message):
        waivers.parse([entry(**change)], rules=RULES, today=TODAY)


def test_a_key_given_twice_in_an_entry_is_refused(tmp_path: Path) -> None:
    """YAML keeps the last of two equal keys: an edit that added a second `expires:` was signed with one date and
    applied with the other, with no word."""
    path = tmp_path / "waivers.yaml"
    body = "".join(f"    {k}: {json.dumps(v)}\n" for k, v in entry().items())
    path.write_text("waivers:\n  - " + body.lstrip() + "    expires: 2026-12-31\n")
    with pytest.raises(waivers.WaiverError, match="key 'expires' is given twice in one mapping .*keep one"):
        waivers.read(path, rules=RULES, today=TODAY)


@pytest.mark.parametrize("key", ["[a, b]", "{a: 1}"])
def test_a_key_yaml_cannot_hash_is_a_clear_error_exit_2(tmp_path: Path, key: str) -> None:
    """The duplicate-key check looked the key up before PyYAML refused it: `? [a, b]` in an entry ended the gate
    in a bare TypeError traceback (exit 4) instead of naming the file and the line (exit 2)."""
    plan, path = tmp_path / "dev.json", tmp_path / "waivers.yaml"
    plan.write_text(json.dumps(fx.aws_stack()))
    path.write_text(f"waivers:\n  - ? {key}\n    : 1\n")
    proc = run_cli("policies.analyze", str(plan), "--out", str(tmp_path / "out"), "--waivers", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{path}: not valid YAML" in proc.stderr and "found unhashable key" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_waiver_matches_only_its_stacks_and_names() -> None:
    (w,) = waivers.parse([entry()], rules=RULES, today=TODAY)
    urn = "urn:pulumi:prod::eu-ml-platform::aws:ec2/securityGroup:SecurityGroup::mlp-prod-bastion-sg"
    assert w.matches("network-no-open-ingress", urn, "prod", undetermined=False)
    assert not w.matches("network-no-open-ingress", urn, "staging", undetermined=False)
    assert not w.matches("node-no-public-ip", urn, "prod", undetermined=False)
    assert not w.matches(
        "network-no-open-ingress", urn.replace("bastion", "nodes"), "prod", undetermined=False
    )
    # What it accepts is a known violation: the same check undecided at preview is not accepted by it.
    assert not w.matches("network-no-open-ingress", urn, "prod", undetermined=True)


def test_a_waiver_for_an_unknown_value_never_hides_a_known_violation() -> None:
    """Waivers written because a value is unknown at preview ('the update-time run checks it') used to waive
    the same rule's real finding too, at preview and at `pulumi up`: Action '*' on '*' passed in prod."""
    (w,) = waivers.parse([entry(finding="undetermined")], rules=RULES, today=TODAY)
    urn = "urn:pulumi:prod::eu-ml-platform::aws:ec2/securityGroup:SecurityGroup::mlp-prod-bastion-sg"
    unknown = {"policy": "network-no-open-ingress", "urn": urn, "undetermined": True}
    known = {"policy": "network-no-open-ingress", "urn": urn, "undetermined": False}
    kept, waived = waivers.split([unknown, known], [w], TODAY, "prod")
    assert kept == [known] and [v["undetermined"] for v in waived] == [True]


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
    proc = analyze_cli(tmp_path, {"waivers": [entry(rule="s3-typo", expires=str(dt.date.today()))]})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no rule named 's3-typo'" in proc.stderr


@pytest.mark.parametrize(
    "pattern", ["*-*", "*p*", "mlp-*"]
)  # "urn:*": refused on its own (test_policy_waivers_strict.py)
def test_a_pattern_matching_every_resource_of_its_stack_is_refused(pattern: str) -> None:
    (w,) = waivers.parse([entry(resources=[pattern], stacks=["dev"])], rules=RULES, today=TODAY)
    resources = [
        {"urn": f"urn:pulumi:dev::eu-ml-platform::aws:s3/bucket:Bucket::mlp-dev-{n}", "name": f"mlp-dev-{n}"}
        for n in ("logs", "data", "models")
    ]
    with pytest.raises(waivers.WaiverError, match="match all 3 resources of stack dev"):
        waivers.refuse_catch_alls([w], "dev", resources)
    waivers.refuse_catch_alls([w], "prod", resources)  # not a stack it names
    (named,) = waivers.parse([entry(resources=["mlp-dev-logs"], stacks=["dev"])], rules=RULES, today=TODAY)
    waivers.refuse_catch_alls([named], "dev", resources)


def test_an_explicit_waivers_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(waivers.WaiverError, match="no such waivers file"):
        waivers.load(tmp_path / "waivers.yaml", rules=RULES, today=TODAY)


def test_committed_waivers_do_not_hide_a_known_wildcard_in_a_real_plan(real_plans: dict[str, Any]) -> None:
    """The review's reproduction: prod's trainer key-use policy turned into Action '*' on '*'. The committed
    waiver #1 (written because that document is unknown at preview) must not accept it."""
    import copy

    from policies.plans import plan_from_dict, to_resources
    from policies.rules import evaluate
    from policies.rules.core import Context, is_undetermined

    plan = copy.deepcopy(real_plans["prod"])
    (target,) = [r for r in plan["resources"] if r["name"] == "mlp-prod-identities-trainer-key"]
    target["inputs"]["policy"] = json.dumps(
        {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    )
    p = plan_from_dict(plan)
    found = [
        {"policy": rule, "urn": f.urn, "message": f.message, "undetermined": is_undetermined(f.message)}
        for rule, f in evaluate(to_resources(p), Context(environment=p.environment))
    ]
    committed = waivers.load(rules=RULES, today=dt.date.today())
    kept, _ = waivers.split(found, committed, dt.date.today(), "prod")
    wildcard = [v for v in kept if v["policy"] == "iam-no-wildcards" and v["urn"] == target["urn"]]
    assert wildcard and not any(v["undetermined"] for v in wildcard)
