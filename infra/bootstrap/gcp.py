"""GCP side of the CI trust: a workload identity pool + GitHub provider (this repository only),
one service account per identity, impersonable only by the token with that exact subject."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.bootstrap import github

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


def _principal(pool_name: str, *, subject: str) -> str:
    """The one workload identity with this exact subject (never a principalSet of many)."""
    return f"principal://iam.googleapis.com/{pool_name}/subject/{subject}"


class GcpBootstrap(pulumi.ComponentResource):
    service_accounts: dict[str, pulumi.Output[str]]
    provider_name: pulumi.Output[str]

    def __init__(self, name: str, args: GcpBootstrapArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eu-ml-platform:bootstrap:Gcp", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        pool = gcp.iam.WorkloadIdentityPool(
            f"{name}-github",
            workload_identity_pool_id=f"{args.name}-github",
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
        for ident in github.identities(args.repository, args.environments):
            account = gcp.serviceaccount.Account(
                f"{name}-{ident.name}",
                account_id=f"{args.name}-ci-{ident.name}"[:30],
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
