"""A result kept for a stack the run did not analyse was kept while its plan was unchanged, even when what else
judged it had changed since: a waiver revoked, a waiver ended, another pack config. Its waived finding then still
read as waived, and the promotion gate passed it. The real runner, a mandatory finding waived for dev."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import pytest
import yaml
from policy_cli import run_cli

TODAY = dt.date(2026, 12, 2)
WAIVER = {
    "rule": "kms-key-rotation",
    "finding": "violation",
    "stacks": ["dev"],
    "resources": ["data-key"],
    "justification": "rotation handled by the key's replacement job",
    "approver": "ENS officer <ens@example.eu>",
    "expires": str(TODAY + dt.timedelta(days=1)),
}


def _setup(tmp_path: Path) -> Path:
    bad = fx.aws_stack()
    fx.find(bad, "aws:kms/key:Key", "data-key")["inputs"]["enableKeyRotation"] = False
    (tmp_path / "dev.json").write_text(json.dumps(bad))
    (tmp_path / "prod.json").write_text(json.dumps(fx.aws_stack("prod", "prod")))
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(yaml.safe_dump({"waivers": [WAIVER]}, sort_keys=False))
    return waivers


def _analyze(tmp_path: Path, stack: str, python: Path, *args: str, today: dt.date = TODAY) -> str:
    proc = run_cli(
        "policies.analyze", str(tmp_path / f"{stack}.json"), "--out", str(tmp_path / "out"),
        "--waivers", str(tmp_path / "waivers.yaml"), "--today", str(today), *args,
        env={"POLICY_PACK_PYTHON": str(python)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stderr


def _dev(tmp_path: Path) -> dict[str, Any] | None:
    path = tmp_path / "out" / "dev.json"
    return json.loads(path.read_text()) if path.exists() else None


@pytest.mark.integration
def test_a_kept_result_goes_when_its_waiver_ends_or_is_revoked(tmp_path: Path, pack_python: Path) -> None:
    waivers = _setup(tmp_path)
    _analyze(tmp_path, "dev", pack_python)
    doc = _dev(tmp_path)
    assert doc is not None and [v["policy"] for v in doc["waived"]] == ["kms-key-rotation"]
    assert "kept" in _analyze(tmp_path, "prod", pack_python)  # same plan, waivers, config: current

    # Two days later the waiver has ended: dev's finding is a mandatory violation now, not "waived".
    err = _analyze(tmp_path, "prod", pack_python, today=TODAY + dt.timedelta(days=2))
    assert _dev(tmp_path) is None, err
    assert f"waiver #1 it relies on ended on {WAIVER['expires']}" in err

    _analyze(tmp_path, "dev", pack_python)
    doc = _dev(tmp_path) or {}
    recorded = (doc["waivers_path"], doc["waivers_file"], doc["config_sha256"])
    assert recorded == (str(waivers), str(waivers), None)
    waivers.write_text(yaml.safe_dump({"waivers": []}))  # the reviewer revokes it
    err = _analyze(tmp_path, "prod", pack_python)
    assert _dev(tmp_path) is None, err
    assert "judged with other waivers" in err and "waivers_sha256 differs" in err


@pytest.mark.integration
def test_a_kept_result_goes_when_the_pack_config_changes(tmp_path: Path, pack_python: Path) -> None:
    _setup(tmp_path)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"all": "advisory"}))
    _analyze(tmp_path, "dev", pack_python, "--config", str(config))
    config.write_text(json.dumps({"all": "mandatory"}))
    err = _analyze(tmp_path, "prod", pack_python, "--config", str(config))
    assert _dev(tmp_path) is None, err
    assert "another pack config" in err and "config_sha256 differs" in err
