"""Fixtures for the promotion tests (helpers in promotion_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from promotion_fixtures import build_record, loadtest, make_candidate, policy_report, write_json


@pytest.fixture
def evidence_files(tmp_path: Path) -> dict[str, Path]:
    """Paths of a fully passing set of inputs for `dev`."""
    return {
        "candidate": make_candidate(tmp_path / "run1"),
        "loadtest": write_json(tmp_path / "loadtest.json", loadtest()),
        "policy_report": write_json(tmp_path / "policy" / "dev.json", policy_report("dev")),
        "build_record": write_json(tmp_path / "build-record.json", build_record()),
    }
