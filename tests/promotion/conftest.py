"""Fixtures for the promotion tests (helpers in promotion_fixtures.py)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from promotion_fixtures import (
    MARKER,
    build_record,
    loadtest,
    make_candidate,
    marked,
    policy_report,
    write_json,
)

from promotion.registry import Registry


@pytest.fixture
def evidence_files(tmp_path: Path) -> dict[str, Path]:
    """Paths of a fully passing set of inputs for `dev`."""
    return {
        "candidate": make_candidate(tmp_path / "run1"),
        "loadtest": write_json(tmp_path / "loadtest.json", loadtest()),
        "policy_report": write_json(tmp_path / "policy" / "dev.json", policy_report("dev")),
        "build_record": write_json(tmp_path / "build-record.json", build_record()),
    }


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    # One sqlite database per test module (creating one runs MLflow's migrations, ~5 s);
    # each test uses its own registered model name.
    for package in ("sqlalchemy", "alembic", "sqlparse"):
        pytest.importorskip(package, reason="MLflow's sqlite registry needs sqlalchemy, alembic, sqlparse")
    return Registry(f"sqlite:///{tmp_path_factory.mktemp('registry')}/mlflow.db")


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A value in MARKER that the commands a test starts inherit: what they left is found, and killed at the end."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, value)
    try:
        yield value
    finally:  # whatever a failing run left
        for proc in marked(value):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
