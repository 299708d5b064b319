"""The bootstrap stacks (infra/bootstrap): GitHub OIDC trust per cloud, preview / push / deploy
identities each trusting one exact subject, and the EU state backend; judged by the pack's own
`ci-oidc-subject-pinned` rule (policies/rules/ci_identity.py), which must also catch mutations.

The programs run under Pulumi's mock engine (no cloud); the resources are read back as the
engine registers them (type tokens, camelCase inputs), which is what the policy pack sees.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from infra.bootstrap import github
from policies.rules import ci_identity
from policies.rules.core import Context, Resource

REPO = "acme/eu-ml-platform"
ENVS = ("dev", "staging", "prod")


class Capture(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[Resource] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        inputs = dict(args.inputs)
        self.resources.append(
            Resource(type=args.typ, name=args.name, urn=f"urn:{args.typ}::{args.name}", inputs=inputs)
        )
        state = {
            **inputs,
            # What IAM returns for GitHub's provider: the ARN names the issuer host.
            "arn": "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"
            if args.typ.endswith("OpenIdConnectProvider")
            else f"arn:aws:iam::123456789012:x/{args.name}",
            "name": inputs.get("name") or f"projects/1/locations/global/workloadIdentityPools/{args.name}",
            "email": f"{args.name}@p.iam.gserviceaccount.com",
            "principalId": f"principal-{args.name}",
            "clientId": f"client-{args.name}",
            "keyId": f"key-{args.name}",
            "bucket": inputs.get("bucket") or args.name,
        }
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


def _render(build: Any) -> list[Resource]:
    mocks = Capture()
    pulumi.runtime.set_mocks(mocks, project="eu-ml-platform-bootstrap", stack="test", preview=False)

    @pulumi.runtime.test
    def program() -> Any:
        component = build()
        return pulumi.Output.all(component.urn)

    program()
    return mocks.resources


@pytest.fixture(scope="module")
def aws_resources() -> list[Resource]:
    from infra.bootstrap.aws import AwsBootstrap, AwsBootstrapArgs

    args = AwsBootstrapArgs(
        name="eu-ml-platform",
        repository=REPO,
        environments=ENVS,
        account_id="123456789012",
        region="eu-south-2",
    )
    return _render(lambda: AwsBootstrap("ci", args))


@pytest.fixture(scope="module")
def gcp_resources() -> list[Resource]:
    from infra.bootstrap.gcp import GcpBootstrap, GcpBootstrapArgs

    return _render(
        lambda: GcpBootstrap(
            "ci", GcpBootstrapArgs(name="eu-ml", repository=REPO, environments=ENVS, project="p")
        )
    )


@pytest.fixture(scope="module")
def azure_resources() -> list[Resource]:
    from infra.bootstrap.azure import AzureBootstrap, AzureBootstrapArgs

    args = AzureBootstrapArgs(
        name="eu-ml",
        repository=REPO,
        environments=ENVS,
        subscription_id="s",
        resource_group="rg",
        location="westeurope",
    )
    return _render(lambda: AzureBootstrap("ci", args))


def _findings(resources: list[Resource]) -> list[str]:
    return [m for r in resources for rule in ci_identity.RULES for m in rule.check_resource(r, Context())]


def test_identities_each_trust_one_exact_subject() -> None:
    subjects = {i.name: i.subject for i in github.identities(REPO, ENVS)}
    assert subjects == {
        "preview": f"repo:{REPO}:pull_request",
        "push": f"repo:{REPO}:ref:refs/heads/main",
        "deploy-dev": f"repo:{REPO}:environment:dev",
        "deploy-staging": f"repo:{REPO}:environment:staging",
        "deploy-prod": f"repo:{REPO}:environment:prod",
    }
    with pytest.raises(github.BootstrapError, match="<owner>/<repo>"):
        github.identities("acme", ENVS)


def test_aws_roles_trust_their_subject_and_the_audience(aws_resources: list[Resource]) -> None:
    roles = {
        r.inputs["name"]: json.loads(r.inputs["assumeRolePolicy"])
        for r in aws_resources
        if r.type == ci_identity.AWS_ROLE
    }
    assert set(roles) == {
        f"eu-ml-platform-ci-{n}" for n in ("preview", "push", "deploy-dev", "deploy-staging", "deploy-prod")
    }
    condition = roles["eu-ml-platform-ci-deploy-prod"]["Statement"][0]["Condition"]["StringEquals"]
    assert condition == {
        "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
        "token.actions.githubusercontent.com:sub": f"repo:{REPO}:environment:prod",
    }
    provider = next(
        r for r in aws_resources if r.type == "aws:iam/openIdConnectProvider:OpenIdConnectProvider"
    )
    assert provider.inputs["url"] == github.ISSUER and provider.inputs["clientIdLists"] == [
        "sts.amazonaws.com"
    ]
    attached = {
        r.inputs["policyArn"]
        for r in aws_resources
        if r.type.endswith("rolePolicyAttachment:RolePolicyAttachment")
    }
    assert "arn:aws:iam::aws:policy/ReadOnlyAccess" in attached
    assert "arn:aws:iam::aws:policy/AdministratorAccess" not in attached
    assert _findings(aws_resources) == []


def test_aws_state_backend_is_versioned_private_and_kms_encrypted(aws_resources: list[Resource]) -> None:
    by_type = {r.type: r for r in aws_resources}
    assert (
        by_type["aws:s3/bucketVersioning:BucketVersioning"].inputs["versioningConfiguration"]["status"]
        == "Enabled"
    )
    block = by_type["aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"].inputs
    assert all(
        block[k] is True
        for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    sse = by_type[
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    ].inputs
    assert sse["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    assert by_type["aws:kms/key:Key"].inputs["enableKeyRotation"] is True


def test_gcp_pool_accepts_this_repository_and_each_account_one_subject(gcp_resources: list[Resource]) -> None:
    provider = next(r for r in gcp_resources if r.type == ci_identity.GCP_PROVIDER)
    assert provider.inputs["attributeCondition"] == f"assertion.repository == '{REPO}'"
    members = [
        r.inputs["member"] for r in gcp_resources if r.type == "gcp:serviceaccount/iAMMember:IAMMember"
    ]
    assert len(members) == 5 and all("/subject/repo:acme/eu-ml-platform:" in m for m in members)
    assert not [m for m in members if "principalSet" in m or "*" in m]
    assert _findings(gcp_resources) == []


def test_azure_federated_credentials_pin_subject_and_audience(azure_resources: list[Resource]) -> None:
    creds = [r.inputs for r in azure_resources if r.type == ci_identity.AZURE_FIC]
    assert {c["subject"] for c in creds} == {i.subject for i in github.identities(REPO, ENVS)}
    assert all(
        c["audiences"] == ["api://AzureADTokenExchange"] and c["issuer"] == github.ISSUER for c in creds
    )
    assert _findings(azure_resources) == []


def _mutated(resource: Resource, **inputs: Any) -> Resource:
    return Resource(
        type=resource.type, name=resource.name, urn=resource.urn, inputs={**resource.inputs, **inputs}
    )


def test_the_rule_catches_loose_trust(
    aws_resources: list[Resource], gcp_resources: list[Resource], azure_resources: list[Resource]
) -> None:
    role = next(r for r in aws_resources if r.type == ci_identity.AWS_ROLE)
    doc = json.loads(role.inputs["assumeRolePolicy"])
    doc["Statement"][0]["Condition"] = {
        "StringLike": {"token.actions.githubusercontent.com:sub": f"repo:{REPO}:*"}
    }
    found = _findings([_mutated(role, assumeRolePolicy=json.dumps(doc))])
    assert any("wildcard" in m for m in found) and any(":aud" in m for m in found)
    del doc["Statement"][0]["Condition"]
    assert any(
        "without a `sub` condition" in m
        for m in _findings([_mutated(role, assumeRolePolicy=json.dumps(doc))])
    )
    provider = next(r for r in gcp_resources if r.type == ci_identity.GCP_PROVIDER)
    assert _findings([_mutated(provider, attributeCondition=None)])
    cred = next(r for r in azure_resources if r.type == ci_identity.AZURE_FIC)
    assert _findings([_mutated(cred, subject="repo:acme/*")])


# GCP account and pool ids: what serviceAccounts.create / workloadIdentityPools.create refuse is refused at preview --


def test_gcp_account_ids_keep_the_ids_deployed_so_far() -> None:
    """Ids are cut to 30 characters as before: a changed id would replace the account and the CI's secrets."""
    from infra.bootstrap.gcp import account_ids

    assert account_ids("eu-ml-platform", github.identities(REPO, ENVS)) == {
        "preview": "eu-ml-platform-ci-preview",
        "push": "eu-ml-platform-ci-push",
        "deploy-dev": "eu-ml-platform-ci-deploy-dev",
        "deploy-staging": "eu-ml-platform-ci-deploy-stagi",
        "deploy-prod": "eu-ml-platform-ci-deploy-prod",
    }


@pytest.mark.parametrize(
    ("name", "environments", "says"),
    [
        # cut to `eu-ml-platform-ci-deploy-test-`: ends in '-'
        ("eu-ml-platform", ("test-a",), "refuses: 'eu-ml-platform-ci-deploy-test-'."),
        # both cut to `eu-ml-platform-ci-deploy-stagi`
        (
            "eu-ml-platform",
            ("staging", "staging2"),
            "'eu-ml-platform-ci-deploy-stagi' for deploy-staging and deploy-staging2",
        ),
        ("EU_ml", ENVS, "'EU_ml-ci-preview'"),
    ],
)
def test_gcp_account_ids_google_refuses_are_refused_at_preview(
    name: str, environments: tuple[str, ...], says: str
) -> None:
    from infra.bootstrap.gcp import GcpBootstrap, GcpBootstrapArgs

    args = GcpBootstrapArgs(name=name, repository=REPO, environments=environments, project="p")
    with pytest.raises(
        github.BootstrapError, match="lowercase letters, digits and hyphens, and shorten"
    ) as e:
        _render(lambda: GcpBootstrap("ci", args))
    assert says in str(e.value)


@pytest.mark.parametrize("name", ["eu-ml-platform-bootstrap-x", "gcp-ml", "Acme"])
def test_a_gcp_pool_id_google_refuses_is_refused_at_preview(name: str) -> None:
    from infra.bootstrap.gcp import pool_id

    with pytest.raises(github.BootstrapError, match=f"pool id '{name}-github' must have"):
        pool_id(name)
    assert pool_id("eu-ml-platform") == "eu-ml-platform-github"
