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


def _check(check_id: str, file: str, line: int) -> dict[str, object]:
    return {
        "check_id": check_id,
        "check_name": check_id,
        "file_abs_path": file,
        "resource": "r",
        "file_line_range": [line, line + 1],
    }


def test_checkov_findings_come_out_in_one_order_whatever_order_checkov_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkov lists findings in the order its runners and threads finish: they entered the report unsorted, so two
    runs over the same files could list them in another order and the signed report was not byte-identical."""
    repo = checkov.REPO_ROOT
    docker, workflow = str(repo / "containers/serving/Dockerfile"), str(repo / ".github/workflows/ci.yml")
    checks = [
        _check("CKV_GHA_7", workflow, 1),
        _check("CKV_DOCKER_3", docker, 12),
        _check("CKV_DOCKER_2", docker, 12),
        _check("CKV_DOCKER_7", docker, 1),
    ]
    reports = {
        "forward": [
            {
                "check_type": "github_actions",
                "results": {"failed_checks": checks[:1]},
                "summary": {"failed": 1},
            },
            {"check_type": "dockerfile", "results": {"failed_checks": checks[1:]}, "summary": {"failed": 3}},
        ]
    }
    reports["reversed"] = [
        {**r, "results": {"failed_checks": r["results"]["failed_checks"][::-1]}}
        for r in reports["forward"][::-1]
    ]
    seen = []
    for name, doc in reports.items():
        out = tmp_path / f"{name}.json"
        out.write_text(json.dumps(doc))
        fake = tmp_path / f"checkov-{name}"
        fake.write_text(f"#!/usr/bin/env python3\nprint(open({str(out)!r}).read())\n")
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv(checkov.CHECKOV_BIN_ENV, str(fake))
        seen.append(checkov.scan([tmp_path], ["dockerfile", "github_actions"]))
    assert seen[0] == seen[1]
    findings, summaries = seen[0]
    assert [(f.file, f.line, f.check_id) for f in findings] == [
        (".github/workflows/ci.yml", 1, "CKV_GHA_7"),
        ("containers/serving/Dockerfile", 1, "CKV_DOCKER_7"),
        ("containers/serving/Dockerfile", 12, "CKV_DOCKER_2"),
        ("containers/serving/Dockerfile", 12, "CKV_DOCKER_3"),
    ]
    assert [s.framework for s in summaries] == ["dockerfile", "github_actions"]
