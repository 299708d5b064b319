"""GCP side of the CI trust: a workload identity pool + GitHub provider (this repository only),
one service account per identity, impersonable only by the token with that exact subject."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.bootstrap import github
from infra.config import limits
from infra.gcp.roles import refused_account_ids

PROJECT_ROLES = {
    "read": ("roles/viewer",),
    "push": ("roles/artifactregistry.writer",),
    # Deploy: the platform's resources; IAM bindings of the platform's own service accounts.
    "deploy": ("roles/editor", "roles/resourcemanager.projectIamAdmin"),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class GcpBootstrapArgs:
    name: str
    repository: str
    environments: tuple[str, ...]
    project: str


def pool_id(name: str) -> str:
    pool = f"{name}-github"
    bound = limits.GCP_WORKLOAD_IDENTITY_POOL_ID
    if not (bound.admits(len(pool)) and re.fullmatch(limits.GCP_WORKLOAD_IDENTITY_POOL_ID_PATTERN, pool)):
        raise github.BootstrapError(
            f"name {name!r}: the workload identity pool id {pool!r} must have {bound.describe()} of [a-z0-9-], "
            f"not starting with gcp-: set `pulumi config set name <shorter, lowercase name>`"
        )
    return pool


def account_ids(name: str, identities: tuple[github.Identity, ...]) -> dict[str, str]:
    """`<name>-ci-<identity>`, cut to the 30 characters an account id may have: the ids deployed so far were
    cut this way, and a changed id would replace the account (and the emails the CI's secrets hold). A cut
    id Google refuses (ends in `-`, other characters) or that two identities share is refused here, naming
    the fix, instead of by serviceAccounts.create halfway through `up`."""
    bound, pattern = limits.GCP_SERVICE_ACCOUNT_ID, limits.GCP_SERVICE_ACCOUNT_ID_PATTERN
    ids = {i.name: f"{name}-ci-{i.name}"[: bound.maximum] for i in identities}
    bad = refused_account_ids(ids)
    if bad:
        raise github.BootstrapError(
            f"service account ids `<name>-ci-<identity>` (cut to {bound.maximum} characters) that Google refuses: "
            f"{', '.join(bad)}. An id needs {bound.describe()} matching {pattern}, one per identity: use a `name` "
            "of lowercase letters, digits and hyphens, and shorten `name` or the environment names"
        )
    return ids


def _principal(pool_name: str, *, subject: str) -> str:
    """The one workload identity with this exact subject (never a principalSet of many)."""
    return f"principal://iam.googleapis.com/{pool_name}/subject/{subject}"


class GcpBootstrap(pulumi.ComponentResource):
    service_accounts: dict[str, pulumi.Output[str]]
    provider_name: pulumi.Output[str]

    def __init__(self, name: str, args: GcpBootstrapArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eu-ml-platform:bootstrap:Gcp", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        identities = github.identities(args.repository, args.environments)
        ids = account_ids(args.name, identities)
        pool = gcp.iam.WorkloadIdentityPool(
            f"{name}-github",
            workload_identity_pool_id=pool_id(args.name),
            project=args.project,
            opts=child,
        )
        provider = gcp.iam.WorkloadIdentityPoolProvider(
            f"{name}-github",
            project=args.project,
            workload_identity_pool_id=pool.workload_identity_pool_id,
            workload_identity_pool_provider_id="github",
            attribute_mapping={
                "google.subject": "assertion.sub",
                "attribute.repository": "assertion.repository",
                "attribute.environment": "assertion.environment",
            },
            attribute_condition=github.gcp_attribute_condition(args.repository),
            oidc={"issuer_uri": github.ISSUER},
            opts=child,
        )
        self.service_accounts = {}
        for ident in identities:
            account = gcp.serviceaccount.Account(
                f"{name}-{ident.name}",
                account_id=ids[ident.name],
                project=args.project,
                display_name=f"CI {ident.name} ({ident.subject})",
                opts=child,
            )
            gcp.serviceaccount.IAMMember(
                f"{name}-{ident.name}-wif",
                service_account_id=account.name,
                role="roles/iam.workloadIdentityUser",
                member=pool.name.apply(functools.partial(_principal, subject=ident.subject)),
                opts=child,
            )
            for role in PROJECT_ROLES[ident.role]:
                gcp.projects.IAMMember(
                    f"{name}-{ident.name}-{role.rsplit('.', 1)[-1].rsplit('/', 1)[-1]}",
                    project=args.project,
                    role=role,
                    member=account.email.apply(lambda email: f"serviceAccount:{email}"),
                    opts=child,
                )
            self.service_accounts[ident.name] = account.email
        self.provider_name = provider.name
        self.register_outputs(
            {"service_accounts": self.service_accounts, "workload_identity_provider": provider.name}
        )
