"""Checkov runs offline: the environment the pack gives it turns off the PyPI update check it makes on every run."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from policies import checkov


def test_checkov_is_run_with_its_update_check_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = tmp_path / "env.json"
    fake = tmp_path / "checkov"
    # A stand-in binary that records the environment it was given and reports no findings.
    fake.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        f"json.dump(dict(os.environ), open({str(seen)!r}, 'w'))\nprint('[]')\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(checkov.CHECKOV_BIN_ENV, str(fake))
    monkeypatch.delenv("CKV_SKIP_PACKAGE_UPDATE_CHECK", raising=False)
    target = tmp_path / "Dockerfile"
    target.write_text("FROM scratch\n")
    assert checkov.scan([target], ["dockerfile"]) == ([], [])
    env = json.loads(seen.read_text())
    assert env["CKV_SKIP_PACKAGE_UPDATE_CHECK"] == "true"
