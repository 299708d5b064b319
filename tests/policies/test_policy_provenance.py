"""A report a reviewer signs: the same inputs give the same bytes, and it names exactly what judged the plans (the
pack's files, not only its version; the waivers and the pack config), as do the results a later run keeps."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import pytest

from policies import report
from policies.client import pack_digest, pack_version
from policies.results import Judges
from policies.waivers import WAIVERS_FILE

TODAY = dt.date(2026, 12, 2)
REPORTS = ("compliance.md", "compliance.html", "policy.sarif", "policy-junit.xml")


@pytest.fixture(scope="module")
def two_runs(
    tmp_path_factory: pytest.TempPathFactory, pack_python: Path
) -> tuple[Path, list[dict[str, bytes]]]:
    """The report built twice over one plan, into one folder (what a reviewer re-runs to check a signed copy)."""
    root = tmp_path_factory.mktemp("provenance")
    plans = root / "plans"
    plans.mkdir()
    (plans / "dev.json").write_text(json.dumps(fx.aws_stack()))
    runs = []
    for _ in range(2):
        report.build(plans, root / "reports", today=TODAY, with_checkov=False, python=pack_python)
        runs.append({name: (root / "reports" / name).read_bytes() for name in REPORTS})
    return root / "reports", runs


@pytest.mark.integration
def test_two_runs_over_the_same_inputs_give_the_same_bytes(
    two_runs: tuple[Path, list[dict[str, bytes]]],
) -> None:
    """The report printed the time to the minute ("Generated 2026-12-07 18:56 UTC"): no two runs matched, so a
    signature or a hash of a signed report could never be checked by running it again."""
    _, (first, second) = two_runs
    assert [n for n in REPORTS if first[n] != second[n]] == []
    for name in ("compliance.md", "compliance.html"):
        text = first[name].decode()
        assert not re.search(r"\b\d{2}:\d{2}\b", text), f"{name} holds a time of day"
        assert re.search(r"Generated \d{4}-\d{2}-\d{2} \(UTC\)", text), f"{name} names no date"


@pytest.mark.integration
def test_the_report_names_the_pack_files_waivers_and_config_it_ran_with(
    two_runs: tuple[Path, list[dict[str, bytes]]],
) -> None:
    """The version (0.2.0) stayed the same while rules changed: the report could not say which rules judged."""
    out, (first, _) = two_runs
    digest = pack_digest()
    result = json.loads((out / "policy/dev.json").read_text())
    assert result["pack"]["sha256"] == digest and result["pack"]["version"] == pack_version()
    md = first["compliance.md"].decode()
    waivers_sha = hashlib.sha256(WAIVERS_FILE.read_bytes()).hexdigest()
    assert f"files sha256 `{digest}`" in md
    assert f"- Waivers: `{WAIVERS_FILE}`, sha256 `{waivers_sha}`" in md
    assert "- Pack config: none" in md
    sarif = json.loads(first["policy.sarif"])
    assert sarif["runs"][0]["properties"]["packSha256"] == digest


def _judges() -> Judges:
    return Judges(WAIVERS_FILE, "w" * 64, None, None, pack_version(), TODAY, pack_digest())


def _kept_result(pack: dict[str, Any]) -> dict[str, Any]:
    return {"waivers_sha256": "w" * 64, "config_sha256": None, "pack": pack, "waived": []}


def test_a_kept_result_judged_by_other_pack_files_is_stale() -> None:
    """A rule edited without a version bump: the other stacks' results, judged by the old rule, were kept as
    current (same plan, waivers, config and version) and the promotion gate read them."""
    judges = _judges()
    same = {"version": pack_version(), "sha256": pack_digest()}
    assert judges.stale(_kept_result(same)) is None
    assert "judged by other pack files" in (judges.stale(_kept_result({**same, "sha256": "0" * 64})) or "")
    older = {"version": pack_version()}  # written before the digest was recorded: cannot be shown current
    assert "records no pack.sha256" in (judges.stale(_kept_result(older)) or "")


def test_the_pack_digest_follows_the_rules_not_the_caches_or_waivers(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    (pack / "rules" / "__pycache__").mkdir(parents=True)
    (pack / "rules" / "iam.py").write_text("LIMIT = 1\n")
    before = pack_digest(pack)
    (pack / "rules" / "__pycache__" / "iam.cpython-311.pyc").write_bytes(b"\0")
    (pack / "waivers.yaml").write_text("waivers: []\n")  # recorded apart, as waivers_sha256
    assert pack_digest(pack) == before
    (pack / "rules" / "iam.py").write_text("LIMIT = 2\n")
    assert pack_digest(pack) != before
