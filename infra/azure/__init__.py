"""Azure implementation of the platform shape: `build(cfg)` declares everything and returns a CloudPlatform."""

from __future__ import annotations

import datetime

import pulumi
import pulumi_azure_native as azure

from infra.azure import roles
from infra.azure.alarms import serving_not_ready_alert
from infra.azure.audit import Audit, AuditWorkspace
from infra.azure.cluster import SPOT_TAINT, Cluster, node_resource_group
from infra.azure.identity import Identities
from infra.azure.keys import EnvironmentKey
from infra.azure.registry import Registry
from infra.azure.storage import Storage
from infra.config import PlatformConfig
from infra.naming import tags
from infra.shape import CloudPlatform, Taint


def build(cfg: PlatformConfig) -> CloudPlatform:
    resource_group = f"rg-{cfg.name}"
    # A name the config cannot judge alone (it joins the stack name and the region): refused before any
    # resource exists, not by AKS after the vault, accounts and registry.
    node_resource_group(cfg, resource_group)
    provider = azure.Provider("azure", location=cfg.region)
    client = azure.authorization.get_client_config(opts=pulumi.InvokeOptions(provider=provider))
    subscription = client.subscription_id
    rg = azure.resources.ResourceGroup(
        f"{cfg.name}-rg",
        resource_group_name=resource_group,
        location=cfg.region,
        tags=tags(cfg),
        opts=pulumi.ResourceOptions(provider=provider),
    )
    in_rg = pulumi.ResourceOptions(provider=provider, depends_on=[rg])

    workspace = AuditWorkspace(f"{cfg.name}-logs", cfg, resource_group=resource_group, opts=in_rg)
    key = EnvironmentKey(
        f"{cfg.name}-key",
        cfg,
        resource_group=resource_group,
        tenant_id=client.tenant_id,
        subscription=subscription,
        deployer_object_id=client.object_id,
        opts=in_rg,
    )
    storage = Storage(f"{cfg.name}-storage", cfg, resource_group=resource_group, key=key, opts=in_rg)
    registry = Registry(f"{cfg.name}-registry", cfg, resource_group=resource_group, key=key, opts=in_rg)
    cluster = Cluster(
        f"{cfg.name}-aks",
        cfg,
        resource_group=resource_group,
        subscription=subscription,
        deployer_object_id=client.object_id,
        key=key,
        registry_id=registry.registry.id,
        opts=in_rg,
    )
    identities = Identities(
        f"{cfg.name}-identities",
        cfg,
        resource_group=resource_group,
        subscription=subscription,
        storage=storage,
        registry_id=registry.registry.id,
        oidc_issuer=cluster.oidc_issuer,
        opts=in_rg,
    )
    account_ids = {
        account: roles.storage_account_id(subscription, resource_group, name)
        for account, name in storage.account_names.items()
    }
    Audit(
        f"{cfg.name}-audit",
        cfg,
        resource_group=resource_group,
        subscription=subscription,
        workspace_id=workspace.workspace.id,
        log_account_id=account_ids["logs"],
        # The budget starts in the month the stack is created (later runs keep it: ignore_changes).
        today=datetime.datetime.now(datetime.UTC).date(),
        targets={
            "aks": ("aks", cluster.cluster.id),
            "data-blob": ("blob", f"{account_ids['data']}/blobServices/default"),
            "logs-blob": ("blob", f"{account_ids['logs']}/blobServices/default"),
            "vault": ("vault", key.vault.id),
            "registry": ("registry", registry.registry.id),
        },
        opts=pulumi.ResourceOptions(provider=provider, depends_on=[rg, *storage.accounts.values()]),
    )
    serving_not_ready_alert(cfg, resource_group=resource_group, cluster_id=cluster.cluster.id, opts=in_rg)
    spot_pools: dict[str, tuple[Taint, ...]] = {
        pool: (SPOT_TAINT,)
        for pool, spec in (("serving", cfg.cluster.serving_pool), ("gpu", cfg.cluster.gpu_pool))
        if spec.spot
    }
    return CloudPlatform(
        cloud="azure",
        cluster_name=cluster.cluster.name,
        kubeconfig=cluster.kubeconfig,
        bucket_uris=storage.uris,
        image_repositories=registry.urls,
        # AKS ships the Azure Disk CSI driver and a default StorageClass, `managed-csi` (StandardSSD_LRS),
        # so PVCs without a class bind (learn.microsoft.com/azure/aks/azure-disk-csi): nothing to declare.
        default_storage_class=None,
        cluster_endpoint=cluster.endpoint,
        registry=registry.host,
        key_ids={"environment": key.key.key_uri, "kubernetes_secrets": key.secrets_key.key_uri},
        identity_principals=dict(identities.client_ids),
        budget_job=identities.budget_job,
        sa_annotations={
            identity: {"azure.workload.identity/client-id": client_id}
            for identity, client_id in identities.client_ids.items()
        },
        # The workload identity webhook only injects tokens into pods with this label.
        pod_labels={identity: {"azure.workload.identity/use": "true"} for identity in identities.client_ids},
        cloud_taints=spot_pools,
        # AKS node auto-drain cordons and drains a spot node on its Preempt scheduled event (>= 30 s
        # notice); no handler to install (learn.microsoft.com/azure/aks/node-auto-drain).
        spot_drain="AKS node auto-drain (Preempt scheduled event, 30 s notice)",
        depends_on=[cluster.cluster, cluster.deployer_access],
    )
