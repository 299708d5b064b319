"""Azure Container Registry (Premium: customer-managed key): admin user off, anonymous pull off.
ACR creates repositories on first push; `training` and `serving` are the two the platform uses."""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure

from infra.azure.keys import EnvironmentKey
from infra.config import PlatformConfig
from infra.naming import compact_name, tags
from infra.shape import IMAGES


class Registry(pulumi.ComponentResource):
    registry: azure.containerregistry.Registry
    urls: dict[str, str]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        resource_group: str,
        key: EnvironmentKey,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:azure:Registry", name, None, opts)
        registry_name = compact_name(cfg, "acr")
        self.registry = azure.containerregistry.Registry(
            f"{name}-acr",
            registry_name=registry_name,
            resource_group_name=resource_group,
            location=cfg.region,
            sku=azure.containerregistry.SkuArgs(name="Premium"),
            admin_user_enabled=False,
            anonymous_pull_enabled=False,
            # ACR keys its identities by resource id, so the (deterministic) id is spelled out.
            identity=azure.containerregistry.IdentityPropertiesArgs(
                type=azure.containerregistry.ResourceIdentityType.USER_ASSIGNED,
                user_assigned_identities={
                    key.encryption_identity_id: azure.containerregistry.UserIdentityPropertiesArgs()
                },
            ),
            encryption=azure.containerregistry.EncryptionPropertyArgs(
                status="enabled",
                key_vault_properties=azure.containerregistry.KeyVaultPropertiesArgs(
                    key_identifier=key.key.key_uri, identity=key.encryption_identity.client_id
                ),
            ),
            policies=azure.containerregistry.PoliciesArgs(
                retention_policy=azure.containerregistry.RetentionPolicyArgs(days=30, status="enabled"),
            ),
            zone_redundancy="Enabled" if cfg.is_prod else "Disabled",
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self, depends_on=key.ready),
        )
        self.host = f"{registry_name}.azurecr.io"
        self.urls = {image: f"{self.host}/{image}" for image in IMAGES}
        self.register_outputs({"urls": self.urls})
