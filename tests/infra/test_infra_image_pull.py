"""The trainer identity (the retraining workflow's) may read exactly the two image repositories, nothing more.

The pipeline's `images` step reads the CI-built images over the registry API as the `trainer` service account
(pipeline/registry_auth.py); infra grants that identity read-only pull from `infra.shape.IMAGE_PULL`, rendered
in every committed stack's plan. AWS actions are checked against AWS's IAM definitions as parliament ships
them, and the trainer's policy is linted by parliament itself.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from infra_fixtures import Plan, aws_iam_definition

from infra import plan as planner
from infra.aws import documents
from infra.azure import roles as azure_roles
from infra.gcp import roles as gcp_roles
from infra.shape import IDENTITIES, IMAGE_PULL, IMAGES, SERVICE_ACCOUNTS
from pipeline import argo

REPO = Path(__file__).resolve().parents[2]
AWS_STACKS = ("dev", "staging", "prod")
PACK_PYTHON = REPO / "policies" / ".venv" / "bin" / "python"


def _ecr_statements(p: Plan, identity: str) -> list[dict[str, Any]]:
    (access,) = [
        r
        for r in p.of_type("aws:iam/rolePolicy:RolePolicy")
        if r["name"] == f"mlp-{p['stack']}-identities-{identity}-access"
    ] or [{"inputs": {"policy": '{"Statement": []}'}}]
    statements: list[dict[str, Any]] = json.loads(access["inputs"]["policy"])["Statement"]
    return [s for s in statements if any(a.startswith("ecr:") for a in s["Action"])]


def test_the_workflow_runs_as_the_identity_that_gets_the_pull() -> None:
    assert IMAGE_PULL["trainer"] == IMAGES  # both images, read only
    assert SERVICE_ACCOUNTS["trainer"].namespace == argo.NAMESPACE
    assert SERVICE_ACCOUNTS["trainer"].name == argo.SERVICE_ACCOUNT


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_aws_trainer_reads_exactly_the_two_repositories(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    repositories = sorted(r["inputs"]["name"] for r in p.of_type("aws:ecr/repository:Repository"))
    assert len(repositories) == len(IMAGES)
    login, pull = _ecr_statements(p, "trainer")
    assert login == {
        "Sid": "EcrLogin",
        "Effect": "Allow",
        "Action": ["ecr:GetAuthorizationToken"],
        "Resource": ["*"],
    }
    assert pull["Sid"] == "EcrPull" and pull["Action"] == ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
    assert [arn.split(":repository/", 1)[1] for arn in pull["Resource"]] == repositories
    # Nobody else that runs in the cluster gets registry rights; the deployer's push is unchanged.
    for identity in IDENTITIES:
        if identity not in ("trainer", "ci-deployer"):
            assert _ecr_statements(p, identity) == [], identity
    pushed = {a for s in _ecr_statements(p, "ci-deployer") for a in s["Action"]}
    writes = set(documents.ECR_PUSH) - set(documents.ECR_PULL)  # PutImage, the layer uploads...
    assert writes <= pushed  # the deployer still pushes
    assert not writes & {*login["Action"], *pull["Action"]}  # the trainer cannot


def test_aws_pull_actions_are_reads_on_repositories_per_aws_definitions(plans: dict[str, Plan]) -> None:
    (ecr,) = [s for s in aws_iam_definition() if s["prefix"] == "ecr"]
    privileges = {a["privilege"]: a for a in ecr["privileges"]}
    for action in documents.ECR_PULL:
        definition = privileges[action.split(":")[1]]
        assert definition["access_level"] == "Read", action
        assert [t["resource_type"] for t in definition["resource_types"]] == ["repository*"], action
    # GetAuthorizationToken takes no resource: `*` is the only value AWS accepts.
    login = privileges["GetAuthorizationToken"]
    assert [t["resource_type"] for t in login["resource_types"] if t["resource_type"]] == []
    assert "ecr:GetAuthorizationToken" in documents.ACTIONS_WITHOUT_RESOURCE_TYPES
    (repository,) = [r for r in ecr["resources"] if r["resource"] == "repository"]
    pattern = (
        re.escape(repository["arn"]).replace(r"\$\{Partition\}", "aws").replace(r"\$\{Region\}", "[a-z0-9-]+")
    )
    pattern = pattern.replace(r"\$\{Account\}", r"\d{12}").replace(r"\$\{RepositoryName\}", r"[a-z0-9._/-]+")
    (_, pull) = _ecr_statements(plans["dev"], "trainer")
    assert all(re.fullmatch(pattern, arn) for arn in pull["Resource"]), (repository["arn"], pull["Resource"])


def test_parliament_finds_nothing_in_the_trainers_policy(plans: dict[str, Plan]) -> None:
    if not PACK_PYTHON.exists():
        pytest.skip("the policy pack's virtualenv (parliament) does not exist: run `make setup`")
    (access,) = [
        r
        for r in plans["dev"].of_type("aws:iam/rolePolicy:RolePolicy")
        if r["name"] == "mlp-dev-identities-trainer-access"
    ]
    script = (
        "import sys, json; from parliament import analyze_policy_string; "
        "print(json.dumps([f.issue for f in analyze_policy_string(sys.stdin.read()).findings]))"
    )
    done = subprocess.run(
        [str(PACK_PYTHON), "-c", script],
        input=access["inputs"]["policy"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout) == []


def test_gcp_trainer_reads_exactly_the_two_repositories(plans: dict[str, Plan]) -> None:
    p = plans["gcp-dev"]
    members = p.of_type("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
    repositories = {
        r["inputs"]["repositoryId"] for r in p.of_type("gcp:artifactregistry/repository:Repository")
    }
    assert len(repositories) == len(IMAGES)
    by_identity = {
        identity: {
            (r["inputs"]["repository"], r["inputs"]["role"])
            for r in members
            if f"-{identity}@" in r["inputs"]["member"]
        }
        for identity in IDENTITIES
    }
    assert by_identity["trainer"] == {(repo, gcp_roles.REPOSITORY_PULL_ROLE) for repo in repositories}
    assert by_identity["ci-deployer"] == {(repo, gcp_roles.REPOSITORY_PUSH_ROLE) for repo in repositories}
    assert by_identity["server"] == by_identity["monitor"] == set()
    assert gcp_roles.REPOSITORY_PULL_ROLE == "roles/artifactregistry.reader"


def test_azure_trainer_gets_acr_pull_on_the_registry_only(
    plans: dict[str, Plan], updates: dict[str, Plan]
) -> None:
    for p in (plans["azure-dev"], updates["azure-dev"]):
        assignments = {
            r["name"].removeprefix("mlp-azure-dev-identities-"): r["inputs"]
            for r in p.of_type("azure-native:authorization:RoleAssignment")
            if r["name"].startswith("mlp-azure-dev-identities-") and r["name"].endswith("-registry")
        }
        assert set(assignments) == {"trainer-registry", "ci-deployer-registry"}
        trainer = assignments["trainer-registry"]
        assert trainer["roleDefinitionId"].rsplit("/", 1)[1] == azure_roles.ACR_PULL  # AcrPull: read only
        assert (
            assignments["ci-deployer-registry"]["roleDefinitionId"].rsplit("/", 1)[1] == azure_roles.ACR_PUSH
        )
    # After `up` (ids known): on the stack's registry, for the trainer's own managed identity.
    u = updates["azure-dev"]
    trainer = u.named("mlp-azure-dev-identities-trainer-registry")["inputs"]
    registry = u.named("mlp-azure-dev-registry-acr", "azure-native:containerregistry:Registry")["inputs"]
    # The registry's ARM id, as Azure returns it (infra/plan_ids.py), not its name.
    assert trainer["scope"] == (
        f"/subscriptions/{planner.MOCK_AZURE_SUBSCRIPTION}/resourceGroups/{registry['resourceGroupName']}"
        f"/providers/Microsoft.ContainerRegistry/registries/{registry['registryName']}"
    )
    assert trainer["principalId"] == "mlp-azure-dev-identities-trainer-principal"
