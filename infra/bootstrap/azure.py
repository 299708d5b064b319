"""Azure side of the CI trust: one user-assigned managed identity per identity, each with one
federated credential for exactly its GitHub subject, and its role on the platform's scope."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure_native

from infra.bootstrap import github

# Built-in role definition ids (the same in every tenant).
ROLE_IDS = {
    "read": "acdd72a7-3385-48ef-bd42-f606fba81ae7",  # Reader
    "push": "8311e382-0749-4cb8-b61a-304f252e45ec",  # AcrPush
    "deploy": "b24988ac-6180-42a0-ab88-20f7382dd24c",  # Contributor
}


@dataclass(frozen=True, kw_only=True, slots=True)
class AzureBootstrapArgs:
    name: str
    repository: str
    environments: tuple[str, ...]
    subscription_id: str
    resource_group: str
    location: str


class AzureBootstrap(pulumi.ComponentResource):
    client_ids: dict[str, pulumi.Output[str]]

    def __init__(
        self, name: str, args: AzureBootstrapArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("eu-ml-platform:bootstrap:Azure", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        scope = f"/subscriptions/{args.subscription_id}/resourceGroups/{args.resource_group}"
        self.client_ids = {}
        for ident in github.identities(args.repository, args.environments):
            identity = azure_native.managedidentity.UserAssignedIdentity(
                f"{name}-{ident.name}",
                resource_name_=f"{args.name}-ci-{ident.name}",
                resource_group_name=args.resource_group,
                location=args.location,
                opts=child,
            )
            azure_native.managedidentity.FederatedIdentityCredential(
                f"{name}-{ident.name}-github",
                resource_name_=identity.name,
                resource_group_name=args.resource_group,
                federated_identity_credential_resource_name="github",
                issuer=github.ISSUER,
                subject=ident.subject,
                audiences=[github.AZURE_AUDIENCE],
                opts=child,
            )
            azure_native.authorization.RoleAssignment(
                f"{name}-{ident.name}-role",
                principal_id=identity.principal_id,
                principal_type="ServicePrincipal",
                role_definition_id=f"/subscriptions/{args.subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{ROLE_IDS[ident.role]}",
                scope=scope,
                opts=child,
            )
            self.client_ids[ident.name] = identity.client_id
        self.register_outputs({"client_ids": self.client_ids})
