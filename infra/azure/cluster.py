"""VNet with a NAT gateway, and AKS: KMS-encrypted secrets (Key Vault), Cilium network policy, API server
restricted to the configured CIDRs, Entra ID auth without local accounts, OIDC issuer + workload identity,
a system pool and user pools for serving and spot GPUs (scale from zero)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_azure_native as azure

from infra.azure import roles
from infra.azure.keys import DATA_KEY, SECRETS_KEY, EnvironmentKey
from infra.config import AzureConfig, ConfigError, PlatformConfig, PoolConfig, limits
from infra.k8s.kubeconfig import aks_kubeconfig
from infra.naming import tags
from infra.network import AKS_DNS_SERVICE_IP, AKS_POD_CIDR, AKS_SERVICE_CIDR, subnet_cidrs
from infra.shape import GPU_TAINT, POOL_LABEL, Taint

# AKS adds this taint to every spot node by itself (it cannot be removed); pods for spot pools must
# tolerate it (learn.microsoft.com/azure/aks/spot-node-pool).
SPOT_TAINT = Taint("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule")


def cluster_name(cfg: PlatformConfig) -> str:
    return f"aks-{cfg.name}"


def node_resource_group(cfg: PlatformConfig, resource_group: str) -> str:
    """The resource group AKS creates for the nodes: its default name, which the deployed clusters have (setting
    `nodeResourceGroup` on an existing cluster replaces it). The stack name is in it twice, so a stack name the
    other names admit can make it longer than AKS takes: refused before any resource exists."""
    name = f"MC_{resource_group}_{cluster_name(cfg)}_{cfg.region}"
    bound = limits.AKS_NODE_RESOURCE_GROUP
    if not bound.admits(len(name)):
        over = len(name) - (bound.maximum or len(name))
        raise ConfigError(
            "stack", cfg.stack,
            f"AKS names the nodes' resource group {name!r}, {len(name)} characters; it takes {bound.describe()}: "
            f"use a stack name of at most {len(cfg.stack) - (over + 1) // 2} characters (it is in the name twice)",
        )  # fmt: skip
    return name


def _pool_args(
    cfg: PlatformConfig, pool: str, spec: PoolConfig, subnet_id: pulumi.Input[str], gpu: bool
) -> dict:
    args: dict = dict(
        vm_size=spec.machine_types[0],
        os_type="Linux",
        os_sku="AzureLinux",
        mode="System" if pool == "system" else "User",
        type="VirtualMachineScaleSets",
        vnet_subnet_id=subnet_id,
        availability_zones=["1", "2", "3"] if cfg.is_prod else None,
        enable_auto_scaling=True,
        min_count=spec.min_nodes,
        max_count=spec.max_nodes,
        count=spec.min_nodes,
        os_disk_size_gb=spec.disk_gb,
        enable_node_public_ip=False,
        enable_encryption_at_host=False,
        node_labels={POOL_LABEL: pool},
        node_taints=[str(GPU_TAINT)] if gpu else None,
        tags=tags(cfg, pool=pool),
    )
    if spec.spot:
        # Delete (not Deallocate) on eviction: deallocated spot VMs still count against quota.
        # -1: pay up to the on-demand price, never evicted for price, only for capacity.
        args.update(scale_set_priority="Spot", scale_set_eviction_policy="Delete", spot_max_price=-1)
    if gpu:
        args.update(gpu_profile=azure.containerservice.GPUProfileArgs(driver="Install"))
    return args


def _host_cidr(ip: str | None) -> str:
    if not ip:
        raise ValueError("the NAT gateway's public IP has no address")
    return f"{ip}/32"


def _kubelet_object_id(profile: Mapping[str, Any] | None) -> str:
    identity = (profile or {}).get("kubeletidentity")
    if identity is None or not identity.object_id:
        raise ValueError("AKS reported no kubelet identity")
    return str(identity.object_id)


def _principal_id(identity: Any) -> str:
    if identity is None or not identity.principal_id:
        raise ValueError("the disk encryption set reported no managed identity")
    return str(identity.principal_id)


def _issuer_url(profile: Any) -> str:
    if profile is None or not profile.issuer_url:
        raise ValueError("AKS reported no OIDC issuer: oidc_issuer_profile.enabled must be true")
    return str(profile.issuer_url)


class Cluster(pulumi.ComponentResource):
    cluster: azure.containerservice.ManagedCluster
    kubeconfig: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        resource_group: str,
        subscription: str,
        deployer_object_id: str,
        key: EnvironmentKey,
        registry_id: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:azure:Cluster", name, None, opts)
        azure_cfg = cfg.azure or AzureConfig()
        child = pulumi.ResourceOptions(parent=self)
        nat_ip = azure.network.PublicIPAddress(
            f"{name}-nat-ip",
            public_ip_address_name=f"pip-{cfg.name}-nat",
            resource_group_name=resource_group,
            location=cfg.region,
            sku=azure.network.PublicIPAddressSkuArgs(name="Standard"),
            public_ip_allocation_method="Static",
            tags=tags(cfg),
            opts=child,
        )
        nat = azure.network.NatGateway(
            f"{name}-nat",
            nat_gateway_name=f"ng-{cfg.name}",
            resource_group_name=resource_group,
            location=cfg.region,
            sku=azure.network.NatGatewaySkuArgs(name="Standard"),
            public_ip_addresses=[azure.network.SubResourceArgs(id=nat_ip.id)],
            tags=tags(cfg),
            opts=child,
        )
        vnet = azure.network.VirtualNetwork(
            f"{name}-vnet",
            virtual_network_name=f"vnet-{cfg.name}",
            resource_group_name=resource_group,
            location=cfg.region,
            address_space=azure.network.AddressSpaceArgs(address_prefixes=[cfg.network.cidr]),
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["subnets"]),
        )
        subnet = azure.network.Subnet(
            f"{name}-nodes",
            subnet_name="nodes",
            virtual_network_name=vnet.name,
            resource_group_name=resource_group,
            address_prefix=subnet_cidrs(cfg.network.cidr, 1)[0][0],
            nat_gateway=azure.network.SubResourceArgs(id=nat.id),
            # Nodes leave only through the NAT gateway (Azure retires default outbound access).
            default_outbound_access=False,
            opts=child,
        )
        control_plane = azure.managedidentity.UserAssignedIdentity(
            f"{name}-control-plane",
            resource_name_=f"id-{cfg.name}-aks",
            resource_group_name=resource_group,
            location=cfg.region,
            tags=tags(cfg),
            opts=child,
        )
        grants = [
            azure.authorization.RoleAssignment(
                f"{name}-control-plane-kms",
                principal_id=control_plane.principal_id,
                principal_type="ServicePrincipal",
                role_definition_id=roles.role_definition_id(subscription, roles.KEY_VAULT_CRYPTO_USER),
                scope=pulumi.Output.concat(key.vault.id, f"/keys/{SECRETS_KEY}"),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[key.secrets_key]),
            ),
            azure.authorization.RoleAssignment(
                f"{name}-control-plane-subnet",
                principal_id=control_plane.principal_id,
                principal_type="ServicePrincipal",
                role_definition_id=roles.role_definition_id(subscription, roles.NETWORK_CONTRIBUTOR),
                scope=subnet.id,
                opts=child,
            ),
        ]
        # Node OS disks with the environment key: a disk encryption set whose identity may use the key.
        disk_encryption = azure.compute.DiskEncryptionSet(
            f"{name}-disk-encryption",
            disk_encryption_set_name=f"des-{cfg.name}",
            resource_group_name=resource_group,
            location=cfg.region,
            encryption_type="EncryptionAtRestWithCustomerKey",
            active_key=azure.compute.KeyForDiskEncryptionSetArgs(
                key_url=key.key.key_uri_with_version,
                source_vault=azure.compute.SourceVaultArgs(id=key.vault.id),
            ),
            rotation_to_latest_key_version_enabled=True,
            identity=azure.compute.EncryptionSetIdentityArgs(type="SystemAssigned"),
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[key.key]),
        )
        grants.append(
            azure.authorization.RoleAssignment(
                f"{name}-disk-encryption-key",
                principal_id=disk_encryption.identity.apply(_principal_id),
                principal_type="ServicePrincipal",
                role_definition_id=roles.role_definition_id(
                    subscription, roles.KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER
                ),
                scope=pulumi.Output.concat(key.vault.id, f"/keys/{DATA_KEY}"),
                opts=child,
            )
        )
        system = cfg.cluster.system_pool
        self.cluster = azure.containerservice.ManagedCluster(
            name,
            resource_name_=cluster_name(cfg),
            resource_group_name=resource_group,
            location=cfg.region,
            dns_prefix=cfg.name,
            kubernetes_version=cfg.cluster.kubernetes_version,
            sku=azure.containerservice.ManagedClusterSKUArgs(
                name="Base", tier="Standard" if cfg.is_prod else "Free"
            ),
            identity=azure.containerservice.ManagedClusterIdentityArgs(
                type=azure.containerservice.ResourceIdentityType.USER_ASSIGNED,
                user_assigned_identities=[control_plane.id],
            ),
            agent_pool_profiles=[
                azure.containerservice.ManagedClusterAgentPoolProfileArgs(
                    name="system", **_pool_args(cfg, "system", system, subnet.id, gpu=False)
                )
            ],
            network_profile=azure.containerservice.ContainerServiceNetworkProfileArgs(
                network_plugin="azure",
                network_plugin_mode="overlay",
                network_dataplane="cilium",
                network_policy="cilium",
                outbound_type="userAssignedNATGateway",
                pod_cidr=AKS_POD_CIDR,
                service_cidr=AKS_SERVICE_CIDR,
                dns_service_ip=AKS_DNS_SERVICE_IP,
            ),
            # The configured ranges and the NAT gateway's address: nodes reach the public API server
            # through the NAT, so without it they cannot register (AKS adds outbound IPs by itself only
            # for load-balancer outbound).
            api_server_access_profile=azure.containerservice.ManagedClusterAPIServerAccessProfileArgs(
                authorized_ip_ranges=[
                    *cfg.network.api_allowed_cidrs,
                    nat_ip.ip_address.apply(_host_cidr),
                ],
                enable_private_cluster=False,
            ),
            aad_profile=azure.containerservice.ManagedClusterAADProfileArgs(
                managed=True,
                enable_azure_rbac=True,
                admin_group_object_ids=list(azure_cfg.admin_group_object_ids) or None,
            ),
            disable_local_accounts=True,
            enable_rbac=True,
            oidc_issuer_profile=azure.containerservice.ManagedClusterOIDCIssuerProfileArgs(enabled=True),
            security_profile=azure.containerservice.ManagedClusterSecurityProfileArgs(
                workload_identity=azure.containerservice.ManagedClusterSecurityProfileWorkloadIdentityArgs(
                    enabled=True
                ),
                azure_key_vault_kms=azure.containerservice.AzureKeyVaultKmsArgs(
                    enabled=True,
                    key_id=key.secrets_key.key_uri_with_version,
                    key_vault_network_access="Public",
                ),
            ),
            disk_encryption_set_id=disk_encryption.id,
            auto_upgrade_profile=azure.containerservice.ManagedClusterAutoUpgradeProfileArgs(
                upgrade_channel="patch", node_os_upgrade_channel="NodeImage"
            ),
            tags=tags(cfg),
            # The cluster autoscaler owns the system pool's node count once it exists.
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=grants,
                ignore_changes=["agentPoolProfiles[0].count"],
            ),
        )
        # Azure RBAC for Kubernetes authorizes every API call: the identity running `pulumi up` needs a
        # Kubernetes role too, or every Kubernetes resource gets 403 (admin groups are for people).
        self.deployer_access = azure.authorization.RoleAssignment(
            f"{name}-deployer-rbac-cluster-admin",
            principal_id=deployer_object_id,
            role_definition_id=roles.role_definition_id(subscription, roles.AKS_RBAC_CLUSTER_ADMIN),
            scope=self.cluster.id,
            opts=child,
        )
        self.endpoint = self.cluster.fqdn.apply(lambda fqdn: f"https://{fqdn}:443")
        self.pools: dict[str, azure.containerservice.AgentPool] = {}
        for pool, spec, gpu in (
            ("serving", cfg.cluster.serving_pool, False),
            ("gpu", cfg.cluster.gpu_pool, True),
        ):
            self.pools[pool] = azure.containerservice.AgentPool(
                f"{name}-{pool}",
                agent_pool_name=pool,
                resource_name_=self.cluster.name,
                resource_group_name=resource_group,
                **_pool_args(cfg, pool, spec, subnet.id, gpu=gpu),
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=["count"]),
            )
        # Nodes pull from our registry with the kubelet identity AKS creates.
        azure.authorization.RoleAssignment(
            f"{name}-kubelet-acr-pull",
            principal_id=self.cluster.identity_profile.apply(_kubelet_object_id),
            principal_type="ServicePrincipal",
            role_definition_id=roles.role_definition_id(subscription, roles.ACR_PULL),
            scope=registry_id,
            opts=child,
        )
        self.oidc_issuer = self.cluster.oidc_issuer_profile.apply(_issuer_url)
        credentials = azure.containerservice.list_managed_cluster_user_credentials_output(
            resource_group_name=resource_group, resource_name=self.cluster.name, format="exec"
        )
        login = azure_cfg.kubelogin_mode
        self.kubeconfig = pulumi.Output.secret(
            credentials.kubeconfigs.apply(
                lambda kcs: aks_kubeconfig(base64.b64decode(kcs[0].value).decode(), login)
            )
        )
        self.register_outputs({"name": self.cluster.name})
