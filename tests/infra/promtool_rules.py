"""`promtool test rules` over the alert rules a plan renders: one test document, run by the real promtool."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra_fixtures import Plan

PROMTOOL = shutil.which("promtool")


def prometheus_values(plan: Plan) -> dict[str, Any]:
    """The values of the plan's prometheus chart release."""
    (release,) = [
        r["inputs"] for r in plan.iter_custom()
        if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"]["chart"] == "prometheus"
    ]  # fmt: skip
    values: dict[str, Any] = release["values"]
    return values


def rules_of(plan: Plan) -> dict[str, Any]:
    """The alert rules exactly as the plan hands them to Prometheus."""
    rules: dict[str, Any] = prometheus_values(plan)["serverFiles"]["alerting_rules.yml"]
    return rules


def require_promtool() -> str:
    if PROMTOOL is None:
        pytest.skip("promtool is missing: apt-get install prometheus")
    return PROMTOOL


def rule_test(cases: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]) -> dict[str, Any]:
    """The test document over `rules.yml`: one case per (input_series, alert_rule_test), one-minute steps."""
    return {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m", "input_series": series, "alert_rule_test": checks} for series, checks in cases
        ],
    }


def assert_rule_test_passes(
    rules: dict[str, Any], cases: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]], folder: Path
) -> None:
    """Writes the rules and the test document into `folder` and runs promtool on them."""
    promtool = require_promtool()
    (folder / "rules.yml").write_text(yaml.safe_dump(rules))
    (folder / "rules.test.yml").write_text(yaml.safe_dump(rule_test(cases), sort_keys=False))
    done = subprocess.run(
        [promtool, "test", "rules", "rules.test.yml"], cwd=folder, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
