"""Storage accounts and blob containers: CMK, versioning, no public or shared-key access, TLS 1.2,
HTTPS only, lifecycle management. Data containers live in one account; access logs in another."""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure

from infra.azure.keys import EnvironmentKey
from infra.config import PlatformConfig
from infra.naming import compact_name, tags
from infra.shape import BUCKETS, DATA_BUCKETS, RAW_SAMPLE_PREFIX


def lifecycle_rules(cfg: PlatformConfig, account: str) -> list[azure.storage.ManagementPolicyRuleArgs]:
    """Old versions expire, checkpoints expire, logs go after the retention period.

    Azure has no multipart uploads to abort: uncommitted blocks are discarded by the service after 7 days.
    """
    st = azure.storage

    def rule(
        name: str, actions: st.ManagementPolicyActionArgs, prefixes: list[str] | None = None
    ) -> st.ManagementPolicyRuleArgs:
        return st.ManagementPolicyRuleArgs(
            name=name,
            type="Lifecycle",
            enabled=True,
            definition=st.ManagementPolicyDefinitionArgs(
                actions=actions,
                filters=st.ManagementPolicyFilterArgs(blob_types=["blockBlob"], prefix_match=prefixes),
            ),
        )

    rules = [
        rule(
            "expire-noncurrent-versions",
            st.ManagementPolicyActionArgs(
                version=st.ManagementPolicyVersionArgs(
                    delete=st.DateAfterCreationArgs(
                        days_after_creation_greater_than=cfg.noncurrent_version_expiry_days
                    )
                )
            ),
        )
    ]
    if account == "data":
        rules.append(
            rule(
                "expire-old-checkpoints",
                st.ManagementPolicyActionArgs(
                    base_blob=st.ManagementPolicyBaseBlobArgs(
                        delete=st.DateAfterModificationArgs(
                            days_after_modification_greater_than=cfg.checkpoint_expiry_days
                        )
                    )
                ),
                ["checkpoints/"],
            )
        )
    else:
        rules.append(
            rule(
                "expire-logs-after-retention",
                st.ManagementPolicyActionArgs(
                    base_blob=st.ManagementPolicyBaseBlobArgs(
                        delete=st.DateAfterModificationArgs(
                            days_after_modification_greater_than=cfg.audit_retention_days
                        )
                    )
                ),
            )
        )
        # The opt-in raw text sample (a prefix of the `logs` container: Azure prefixes start with the
        # container): its own short retention, and old versions gone a day later.
        rules.append(
            rule(
                "expire-raw-sample",
                st.ManagementPolicyActionArgs(
                    base_blob=st.ManagementPolicyBaseBlobArgs(
                        delete=st.DateAfterModificationArgs(
                            days_after_modification_greater_than=cfg.monitoring.raw_retention_days
                        )
                    ),
                    version=st.ManagementPolicyVersionArgs(
                        delete=st.DateAfterCreationArgs(days_after_creation_greater_than=1)
                    ),
                ),
                [f"logs/{RAW_SAMPLE_PREFIX}"],
            )
        )
    return rules


class Storage(pulumi.ComponentResource):
    accounts: dict[str, azure.storage.StorageAccount]
    account_names: dict[str, str]
    # Bucket purpose -> (account key, container name).
    containers: dict[str, tuple[str, str]]
    # Bucket purpose -> its BlobContainer: what a container-scoped role assignment waits for.
    blob_containers: dict[str, azure.storage.BlobContainer]
    uris: dict[str, str]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        resource_group: str,
        key: EnvironmentKey,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:azure:Storage", name, None, opts)
        self.accounts, self.account_names = {}, {}
        self.blob_containers = {}
        self.containers = {p: ("data" if p in DATA_BUCKETS else "logs", p) for p in BUCKETS}
        identity_id = key.encryption_identity.id
        for account in ("data", "logs"):
            account_name = compact_name(cfg, "data" if account == "data" else "logs")
            self.account_names[account] = account_name
            sa = azure.storage.StorageAccount(
                f"{name}-{account}",
                account_name=account_name,
                resource_group_name=resource_group,
                location=cfg.region,
                kind="StorageV2",
                sku=azure.storage.SkuArgs(name="Standard_ZRS" if cfg.is_prod else "Standard_LRS"),
                allow_blob_public_access=False,
                allow_shared_key_access=False,
                default_to_o_auth_authentication=True,
                minimum_tls_version="TLS1_2",
                enable_https_traffic_only=True,
                allow_cross_tenant_replication=False,
                identity=azure.storage.IdentityArgs(
                    type="UserAssigned", user_assigned_identities=[identity_id]
                ),
                encryption=azure.storage.EncryptionArgs(
                    key_source="Microsoft.Keyvault",
                    key_vault_properties=azure.storage.KeyVaultPropertiesArgs(
                        key_name="data", key_vault_uri=key.vault.properties.vault_uri
                    ),
                    encryption_identity=azure.storage.EncryptionIdentityArgs(
                        encryption_user_assigned_identity=identity_id
                    ),
                    require_infrastructure_encryption=True,
                    services=azure.storage.EncryptionServicesArgs(
                        blob=azure.storage.EncryptionServiceArgs(enabled=True, key_type="Account"),
                        file=azure.storage.EncryptionServiceArgs(enabled=True, key_type="Account"),
                    ),
                ),
                tags=tags(cfg, purpose=account),
                opts=pulumi.ResourceOptions(parent=self, depends_on=key.ready),
            )
            self.accounts[account] = sa
            # The blob service (versioning, soft delete), the lifecycle policy and the containers are resources
            # of their own, which the account's `protect` does not cover: infra/lifecycle.py protects each in prod.
            child = pulumi.ResourceOptions(parent=self, depends_on=[sa])
            blob_service = azure.storage.BlobServiceProperties(
                f"{name}-{account}-blob-service",
                account_name=account_name,
                resource_group_name=resource_group,
                blob_services_name="default",
                is_versioning_enabled=True,
                delete_retention_policy=azure.storage.DeleteRetentionPolicyArgs(enabled=True, days=30),
                container_delete_retention_policy=azure.storage.DeleteRetentionPolicyArgs(
                    enabled=True, days=30
                ),
                opts=child,
            )
            azure.storage.ManagementPolicy(
                f"{name}-{account}-lifecycle",
                account_name=account_name,
                resource_group_name=resource_group,
                management_policy_name="default",
                policy=azure.storage.ManagementPolicySchemaArgs(rules=lifecycle_rules(cfg, account)),
                opts=child,
            )
            for purpose, (owner, container) in self.containers.items():
                if owner != account:
                    continue
                self.blob_containers[purpose] = azure.storage.BlobContainer(
                    f"{name}-{purpose}",
                    account_name=account_name,
                    resource_group_name=resource_group,
                    container_name=container,
                    public_access=azure.storage.PublicAccess.NONE,
                    opts=pulumi.ResourceOptions.merge(
                        child, pulumi.ResourceOptions(depends_on=[blob_service])
                    ),
                )
        self.uris = {
            purpose: f"https://{self.account_names[owner]}.blob.core.windows.net/{container}"
            for purpose, (owner, container) in self.containers.items()
        }
        self.register_outputs({"uris": self.uris})
