"""User-assigned managed identities for trainer, server and CI deployer, federated with their Kubernetes
service accounts (AKS workload identity) and assigned roles on single containers or the registry."""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure

from infra.azure import roles
from infra.azure.storage import Storage
from infra.config import PlatformConfig
from infra.naming import tags
from infra.shape import (
    BUDGET_IDENTITY,
    BUDGET_SERVICE_ACCOUNT,
    IDENTITIES,
    SERVICE_ACCOUNTS,
    BudgetJob,
    ServiceAccountRef,
)

TOKEN_AUDIENCE = "api://AzureADTokenExchange"


def _workload_identity(
    name: str,
    cfg: PlatformConfig,
    identity: str,
    sa: ServiceAccountRef,
    resource_group: str,
    oidc_issuer: pulumi.Input[str],
    child: pulumi.ResourceOptions,
) -> azure.managedidentity.UserAssignedIdentity:
    """A user-assigned identity that only pods of one Kubernetes service account can act as."""
    uai = azure.managedidentity.UserAssignedIdentity(
        f"{name}-{identity}",
        resource_name_=f"id-{cfg.name}-{identity}",
        resource_group_name=resource_group,
        location=cfg.region,
        tags=tags(cfg, identity=identity),
        opts=child,
    )
    azure.managedidentity.FederatedIdentityCredential(
        f"{name}-{identity}-federation",
        federated_identity_credential_resource_name=f"k8s-{sa.namespace}-{sa.name}",
        resource_name_=uai.name,
        resource_group_name=resource_group,
        issuer=oidc_issuer,
        subject=roles.federated_subject(sa.namespace, sa.name),
        audiences=[TOKEN_AUDIENCE],
        opts=child,
    )
    return uai


class Identities(pulumi.ComponentResource):
    client_ids: dict[str, pulumi.Output[str]]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        resource_group: str,
        subscription: str,
        storage: Storage,
        registry_id: pulumi.Input[str],
        oidc_issuer: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:azure:Identities", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        rg_id = roles.resource_group_id(subscription, resource_group)
        writer = azure.authorization.RoleDefinition(
            f"{name}-blob-writer",
            role_definition_id=roles.writer_role_guid(cfg.stack),
            role_name=f"{cfg.name} blob writer",
            description="Create blobs; no read, list or delete (write-only model publishing).",
            role_type="CustomRole",
            scope=rg_id,
            assignable_scopes=[rg_id],
            permissions=[
                azure.authorization.PermissionArgs(data_actions=list(roles.BLOB_WRITE_DATA_ACTIONS))
            ],
            opts=child,
        )
        self.client_ids = {}
        for identity in IDENTITIES:
            uai = _workload_identity(
                name, cfg, identity, SERVICE_ACCOUNTS[identity], resource_group, oidc_issuer, child
            )
            self.client_ids[identity] = uai.client_id
            for a in roles.container_assignments(identity):
                owner, container = storage.containers[a.target]
                role_id = (
                    writer.id
                    if a.role == roles.WRITER_ROLE
                    else roles.role_definition_id(subscription, a.role)
                )
                azure.authorization.RoleAssignment(
                    f"{name}-{identity}-{a.target}",
                    principal_id=uai.principal_id,
                    principal_type="ServicePrincipal",
                    role_definition_id=role_id,
                    scope=roles.container_scope(
                        subscription, resource_group, storage.account_names[owner], container
                    ),
                    # The scope is a string: without the container here the assignment could race its creation.
                    opts=pulumi.ResourceOptions(
                        parent=self, depends_on=[storage.accounts[owner], storage.blob_containers[a.target]]
                    ),
                )
            for pa in roles.prefix_assignments(identity):
                owner, container = storage.containers[pa.target]
                azure.authorization.RoleAssignment(
                    f"{name}-{identity}-{pa.target}-{'-'.join(p.strip('/') for p in pa.prefixes)}",
                    principal_id=uai.principal_id,
                    principal_type="ServicePrincipal",
                    role_definition_id=(
                        writer.id
                        if pa.role == roles.WRITER_ROLE
                        else roles.role_definition_id(subscription, pa.role)
                    ),
                    scope=roles.container_scope(
                        subscription, resource_group, storage.account_names[owner], container
                    ),
                    condition=pa.condition,
                    condition_version="2.0",
                    opts=pulumi.ResourceOptions(
                        parent=self, depends_on=[storage.accounts[owner], storage.blob_containers[pa.target]]
                    ),
                )
            for a in roles.registry_assignments(identity):
                azure.authorization.RoleAssignment(
                    f"{name}-{identity}-{a.target}",
                    principal_id=uai.principal_id,
                    principal_type="ServicePrincipal",
                    role_definition_id=roles.role_definition_id(subscription, a.role),
                    scope=registry_id,
                    opts=child,
                )
        self.budget_job = self._budget_identity(name, cfg, resource_group, subscription, oidc_issuer, child)
        self.register_outputs({})

    def _budget_identity(
        self,
        name: str,
        cfg: PlatformConfig,
        resource_group: str,
        subscription: str,
        oidc_issuer: pulumi.Input[str],
        child: pulumi.ResourceOptions,
    ) -> BudgetJob:
        """The budget cost job's own identity (infra/k8s/budget.py): Cost Management Reader on the resource
        group, the scope infra/azure/audit.py gives the consumption budget; no storage, no registry."""
        uai = _workload_identity(
            name, cfg, BUDGET_IDENTITY, BUDGET_SERVICE_ACCOUNT, resource_group, oidc_issuer, child
        )
        scope = roles.resource_group_id(subscription, resource_group)
        azure.authorization.RoleAssignment(
            f"{name}-{BUDGET_IDENTITY}-cost-reader",
            principal_id=uai.principal_id,
            principal_type="ServicePrincipal",
            role_definition_id=roles.role_definition_id(subscription, roles.COST_MANAGEMENT_READER),
            scope=scope,
            opts=child,
        )
        return BudgetJob(
            cli_args=("--cloud", "azure", "--scope", scope),
            sa_annotations={"azure.workload.identity/client-id": uai.client_id},
            pod_labels={"azure.workload.identity/use": "true"},
        )
