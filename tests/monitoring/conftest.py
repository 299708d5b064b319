"""Monitoring fixtures: the serving tests' tiny bundle and tritonserver helper, reused (not redefined)."""

from __future__ import annotations

import os

os.environ.setdefault("DO_NOT_TRACK", "1")  # Evidently: no telemetry, ever

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from tests.serving.conftest import start_server, tiny_bundle  # noqa: E402, F401


@pytest.fixture(scope="session")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The split manifest training writes (training.data.load on the bundled corpus, default split)."""
    from training.config import DataConfig
    from training.data import load

    path = tmp_path_factory.mktemp("run") / "manifest.json"
    path.write_text(json.dumps(load(DataConfig()).manifest))
    return path


def prom_lines(out: Path) -> set[str]:
    """The samples of the metrics.prom a monitoring job wrote to `out` (comments dropped)."""
    return {line for line in (out / "metrics.prom").read_text().splitlines() if not line.startswith("#")}


def alerts() -> dict[str, dict]:
    """Every alert rule of monitoring/rules/*.yaml by its name."""
    import yaml

    from monitoring.localstack import RULES

    return {
        rule["alert"]: rule
        for path in sorted(RULES.glob("*.yaml"))
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
