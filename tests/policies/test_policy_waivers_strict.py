"""Waivers files a reviewer mistypes, and patterns broader than one resource type: each was accepted silently
(no waivers loaded, or a whole provider's resources waived); each is now refused with what to fix."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from policy_cli import analyze_cli
from test_policy_waivers import entry as valid_entry

from policies import waivers
from policies.rules import ALL_RULES

TODAY = dt.date(2026, 12, 2)
RULES = [r.name for r in ALL_RULES]
REPO = Path(__file__).resolve().parents[2]
BUCKET = "urn:pulumi:prod::eu-ml-platform::aws:s3/bucket:Bucket::mlp-prod-logs"
ROLE = "urn:pulumi:prod::eu-ml-platform::aws:iam/role:Role::mlp-prod-trainer"


def entry(**change: Any) -> dict[str, Any]:
    """test_policy_waivers' valid entry, for one log bucket."""
    bucket = {"rule": "bucket-versioning", "resources": ["mlp-prod-logs"],
              "justification": "log bucket: objects are written once"}  # fmt: skip
    return valid_entry(**{**bucket, **change})


def test_a_misspelt_top_level_key_is_exit_2_naming_it(tmp_path: Path) -> None:
    """`waiver:` for `waivers:` loaded no waivers and went on (here: to start the pack, exit 3)."""
    proc = analyze_cli(tmp_path, {"waiver": [entry(stacks=["dev"], resources=["mlp-dev-logs"])]})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(tmp_path / "waivers.yaml") in proc.stderr
    assert "'waiver' (did you mean 'waivers'?)" in proc.stderr and "['waivers']" in proc.stderr
    assert not list((tmp_path / "out").glob("*.json"))


@pytest.mark.parametrize(
    ("rename", "message"),
    [
        # was: "lacks ['expires']", which sent the reviewer looking for a field they had written
        (("expires", "expiry"), r"unknown field\(s\) 'expiry' \(did you mean 'expires'\?\)"),
        (("justification", "reson"), r"unknown field\(s\) 'reson'; the fields it accepts: \['rule'"),
    ],
)
def test_a_misspelt_waiver_field_names_it_and_the_fields_it_accepts(
    rename: tuple[str, str], message: str
) -> None:
    bad = entry()
    old, new = rename
    bad[new] = bad.pop(old)
    if new == "reson":
        bad["justification"] = "kept, so only the unknown field is wrong"
    with pytest.raises(waivers.WaiverError, match=message):
        waivers.parse([bad], "waivers.yaml", rules=RULES, today=TODAY)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (
            "urn:pulumi:prod::eu-ml-platform::aws:*",
            "type part 'eu-ml-platform' must be one resource type",
        ),  # was: all AWS
        ("urn:pulumi:prod::eu-ml-platform::aws:*::mlp-prod-logs", "type part 'aws:\\*' must be one resource"),
        ("urn:pulumi:prod::eu-ml-platform::aws:s3/*:Bucket::*", "type part 'aws:s3/\\*:Bucket' must be one"),
        ("*::*:Bucket::mlp-prod-logs", "type part '\\*:Bucket' must be one resource type"),
        ("urn:*", "is not a URN pattern ending in ::<type>::<name>"),
        ("*::aws:s3/bucket:Bucket", "is not a URN pattern ending in ::<type>::<name>"),
        (
            "urn:pulumi:dev::eu-ml-platform::aws:s3/bucket:Bucket::x",
            "names stack 'dev', which is not in stacks",
        ),
    ],
)
def test_a_pattern_wider_than_one_type_is_refused(pattern: str, message: str) -> None:
    with pytest.raises(waivers.WaiverError, match=f"waiver #1: resources pattern .*{message}"):
        waivers.parse([entry(resources=[pattern])], rules=RULES, today=TODAY)


def test_a_name_pattern_never_matches_a_type() -> None:
    """Name patterns were matched against the whole URN as well: '*Bucket*' waived every S3 bucket and
    '*aws:*' every AWS resource, whatever their names."""
    (by_type,) = waivers.parse([entry(resources=["*Bucket*"])], rules=RULES, today=TODAY)
    assert not by_type.matches("bucket-versioning", BUCKET, "prod", undetermined=False)
    (provider,) = waivers.parse([entry(resources=["*aws:*"])], rules=RULES, today=TODAY)
    assert not provider.matches("bucket-versioning", ROLE, "prod", undetermined=False)


@pytest.mark.parametrize(
    "pattern",
    [
        "urn:pulumi:prod::eu-ml-platform::aws:s3/bucket:Bucket::mlp-prod-*",
        "urn:pulumi:*::*::aws:s3/bucket:Bucket::mlp-prod-logs",  # the waiver's `stacks` still pins the stack
        "*::aws:s3/bucket:Bucket::mlp-*-logs",
    ],
)
def test_one_type_with_wildcards_elsewhere_is_accepted(pattern: str) -> None:
    (w,) = waivers.parse([entry(resources=[pattern])], rules=RULES, today=TODAY)
    assert w.matches("bucket-versioning", BUCKET, "prod", undetermined=False)
    assert not w.matches("bucket-versioning", ROLE.replace("trainer", "logs"), "prod", undetermined=False)


def test_name_patterns_still_match_names() -> None:
    (named,) = waivers.parse(
        [entry(resources=["mlp-prod-*-logs", "mlp-prod-logs"])], rules=RULES, today=TODAY
    )
    assert named.matches("bucket-versioning", BUCKET, "prod", undetermined=False)


def test_every_waivers_file_in_the_repository_still_loads() -> None:
    files = sorted(
        p for p in REPO.glob("**/waivers*.y*ml") if ".venv" not in p.parts and "node_modules" not in p.parts
    )
    assert waivers.WAIVERS_FILE in files
    for path in files:
        waivers.load(path, rules=RULES, today=dt.date.today())
