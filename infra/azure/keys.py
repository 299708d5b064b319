"""Key Vault (RBAC, soft delete, purge protection) with the environment's RSA key and its rotation policy."""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure

from infra.azure import roles
from infra.config import PlatformConfig
from infra.naming import compact_name, tags

DATA_KEY, SECRETS_KEY = "data", "kubernetes-secrets"


def _rsa_key(rotation: str, *, expires: bool) -> azure.keyvault.KeyPropertiesArgs:
    actions = [
        azure.keyvault.LifetimeActionArgs(
            action=azure.keyvault.ActionArgs(type=azure.keyvault.KeyRotationPolicyActionType.ROTATE),
            trigger=azure.keyvault.TriggerArgs(time_after_create=rotation),
        )
    ]
    if expires:
        actions.append(
            azure.keyvault.LifetimeActionArgs(
                action=azure.keyvault.ActionArgs(type=azure.keyvault.KeyRotationPolicyActionType.NOTIFY),
                trigger=azure.keyvault.TriggerArgs(time_before_expiry="P30D"),
            )
        )
    return azure.keyvault.KeyPropertiesArgs(
        kty="RSA",
        key_size=3072,
        key_ops=["encrypt", "decrypt", "wrapKey", "unwrapKey"],
        rotation_policy=azure.keyvault.RotationPolicyArgs(
            attributes=azure.keyvault.KeyRotationPolicyAttributesArgs(expiry_time="P1Y") if expires else None,
            lifetime_actions=actions,
        ),
    )


class EnvironmentKey(pulumi.ComponentResource):
    vault: azure.keyvault.Vault
    key: azure.keyvault.Key
    # The key AKS encrypts Kubernetes secrets with (KMS): see below why it is a key of its own.
    secrets_key: azure.keyvault.Key
    # Identity that storage and the registry use to reach the key (customer-managed keys need one).
    encryption_identity: azure.managedidentity.UserAssignedIdentity
    ready: list[pulumi.Resource]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        resource_group: str,
        tenant_id: str,
        subscription: str,
        deployer_object_id: str,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:azure:EnvironmentKey", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.vault_name = compact_name(cfg, "kv")
        self.vault = azure.keyvault.Vault(
            f"{name}-vault",
            vault_name=self.vault_name,
            resource_group_name=resource_group,
            location=cfg.region,
            properties=azure.keyvault.VaultPropertiesArgs(
                tenant_id=tenant_id,
                sku=azure.keyvault.SkuArgs(
                    family="A",
                    name=azure.keyvault.SkuName.PREMIUM if cfg.is_prod else azure.keyvault.SkuName.STANDARD,
                ),
                enable_rbac_authorization=True,
                enable_soft_delete=True,
                soft_delete_retention_in_days=90,
                # Irreversible: a deleted key cannot be purged before its retention ends.
                enable_purge_protection=True,
                # Access is RBAC-only; the AKS KMS plugin reaches the vault over its public endpoint.
                network_acls=azure.keyvault.NetworkRuleSetArgs(
                    default_action="Allow", bypass="AzureServices"
                ),
            ),
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self),
        )
        # The deployer needs data-plane rights to create the key in an RBAC vault.
        deployer = azure.authorization.RoleAssignment(
            f"{name}-deployer-crypto-officer",
            principal_id=deployer_object_id,
            role_definition_id=roles.role_definition_id(subscription, roles.KEY_VAULT_CRYPTO_OFFICER),
            scope=self.vault.id,
            opts=child,
        )
        rotation = f"P{cfg.key_rotation_days}D"
        after_deployer = pulumi.ResourceOptions(parent=self, depends_on=[deployer])
        # Storage, the registry and the disk encryption set use the versionless key and follow each
        # rotation; versions expire a year after creation (a notification comes 30 days before).
        self.key = azure.keyvault.Key(
            f"{name}-key",
            key_name=DATA_KEY,
            vault_name=self.vault.name,
            resource_group_name=resource_group,
            properties=_rsa_key(rotation, expires=True),
            tags=tags(cfg),
            opts=after_deployer,
        )
        # AKS's KMS plugin takes one key *version* (it cannot follow rotation by itself), so this key's
        # versions never expire: a version AKS still uses stays valid after rotation. `pulumi up --refresh`
        # after a rotation moves AKS to the newest version (AKS re-encrypts the secrets).
        self.secrets_key = azure.keyvault.Key(
            f"{name}-secrets-key",
            key_name=SECRETS_KEY,
            vault_name=self.vault.name,
            resource_group_name=resource_group,
            properties=_rsa_key(rotation, expires=False),
            tags=tags(cfg),
            opts=after_deployer,
        )
        identity_name = f"id-{cfg.name}-encryption"
        self.encryption_identity_id = roles.user_assigned_identity_id(
            subscription, resource_group, identity_name
        )
        self.encryption_identity = azure.managedidentity.UserAssignedIdentity(
            f"{name}-encryption-identity",
            resource_name_=identity_name,
            resource_group_name=resource_group,
            location=cfg.region,
            tags=tags(cfg),
            opts=child,
        )
        grant = azure.authorization.RoleAssignment(
            f"{name}-encryption-identity-key",
            principal_id=self.encryption_identity.principal_id,
            principal_type="ServicePrincipal",
            role_definition_id=roles.role_definition_id(
                subscription, roles.KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER
            ),
            # Scoped to this key, not the vault.
            scope=pulumi.Output.concat(self.vault.id, f"/keys/{DATA_KEY}"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.key]),
        )
        self.ready = [self.key, grant]
        self.register_outputs({"key": self.key.key_uri})
