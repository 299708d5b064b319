"""VPC with Cloud NAT, and a regional GKE cluster: private nodes, CMEK-encrypted secrets, Dataplane V2
network policy, restricted control-plane access, Workload Identity, and three node pools."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig, PoolConfig, limits
from infra.gcp import roles
from infra.gcp.keys import EnvironmentKey
from infra.gcp.registry import Registry
from infra.k8s.kubeconfig import exec_kubeconfig
from infra.naming import tags
from infra.network import GKE_CONTROL_PLANE_RANGE, GKE_POD_RANGE, GKE_SERVICE_RANGE, subnet_cidrs
from infra.shape import GPU_TAINT_KEY, GPU_TAINT_VALUE, POOL_LABEL

NODE_ROLES = ["roles/logging.logWriter", "roles/monitoring.metricWriter", "roles/monitoring.viewer"]
CONTROL_PLANE_LOGS = ["SYSTEM_COMPONENTS", "APISERVER", "CONTROLLER_MANAGER", "SCHEDULER", "WORKLOADS"]


def initial_nodes_per_zone(spec: PoolConfig, *, gpu: bool) -> int:
    """The pool's `initial_node_count`, which GKE applies per zone: the fewest that reach the pool's total
    minimum (at least one node, so the system pods have somewhere to run before the autoscaler acts).
    `min_nodes` itself per zone would start a prod pool of min 2, max 4 with 6 nodes."""
    return 0 if gpu else limits.gke_initial_nodes_per_zone(spec.min_nodes)


def _pool(
    name: str,
    cfg: PlatformConfig,
    *,
    pool: str,
    spec: PoolConfig,
    cluster: gcp.container.Cluster,
    node_sa: str,
    gpu: bool,
    key_name: str,
    opts: pulumi.ResourceOptions,
) -> gcp.container.NodePool:
    node_config = gcp.container.NodePoolNodeConfigArgs(
        machine_type=spec.machine_types[0],
        spot=spec.spot,
        disk_size_gb=spec.disk_gb,
        # Boot disks with the environment key (the compute service agent holds the grant).
        boot_disk_kms_key=key_name,
        service_account=node_sa,
        oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"],
        labels={POOL_LABEL: pool},
        resource_labels=tags(cfg, pool=pool),
        # GKE taints GPU nodes itself, but only when it creates them; declared so the scheduler and the
        # autoscaler's node template agree from zero nodes on.
        taints=(
            [
                gcp.container.NodePoolNodeConfigTaintArgs(
                    key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect="NO_SCHEDULE"
                )
            ]
            if gpu
            else None
        ),
        guest_accelerators=(
            [
                gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                    type=spec.gpu_type or "",  # config.parse requires gpuType for the GPU pool
                    count=spec.gpus_per_node,
                    gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                        gpu_driver_version="LATEST"
                    ),
                )
            ]
            if gpu
            else None
        ),
        workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
            mode="GKE_METADATA"
        ),
        shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
            enable_secure_boot=True, enable_integrity_monitoring=True
        ),
    )
    return gcp.container.NodePool(
        name,
        name=pool,
        cluster=cluster.id,
        location=cfg.region,
        initial_node_count=initial_nodes_per_zone(spec, gpu=gpu),
        # Total over the region's zones (min/max_node_count would be per zone).
        autoscaling=gcp.container.NodePoolAutoscalingArgs(
            total_min_node_count=spec.min_nodes,
            total_max_node_count=spec.max_nodes,
            location_policy="ANY" if spec.spot else "BALANCED",
        ),
        management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
        node_config=node_config,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(ignore_changes=["initialNodeCount"])),
    )


class Cluster(pulumi.ComponentResource):
    cluster: gcp.container.Cluster
    kubeconfig: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        project: str,
        key: EnvironmentKey,
        registry: Registry,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:gcp:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        network = gcp.compute.Network(
            f"{name}-vpc", name=f"{cfg.name}-vpc", auto_create_subnetworks=False, opts=child
        )
        node_cidr = subnet_cidrs(cfg.network.cidr, 1)[0][0]
        subnet = gcp.compute.Subnetwork(
            f"{name}-nodes",
            name=f"{cfg.name}-nodes",
            network=network.id,
            region=cfg.region,
            ip_cidr_range=node_cidr,
            private_ip_google_access=True,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name="pods", ip_cidr_range=GKE_POD_RANGE),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(
                    range_name="services", ip_cidr_range=GKE_SERVICE_RANGE
                ),
            ],
            log_config=gcp.compute.SubnetworkLogConfigArgs(
                aggregation_interval="INTERVAL_5_SEC", flow_sampling=0.5
            ),
            opts=child,
        )
        router = gcp.compute.Router(
            f"{name}-router", name=f"{cfg.name}-router", network=network.id, region=cfg.region, opts=child
        )
        gcp.compute.RouterNat(
            f"{name}-nat",
            name=f"{cfg.name}-nat",
            router=router.name,
            region=cfg.region,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=child,
        )
        node_sa_id = roles.account_id(cfg, roles.NODES_IDENTITY)
        node_sa = gcp.serviceaccount.Account(
            f"{name}-nodes-sa", account_id=node_sa_id, display_name=f"{cfg.name} GKE nodes", opts=child
        )
        node_sa_email = f"{node_sa_id}@{project}.iam.gserviceaccount.com"
        grants: list[pulumi.Resource] = [
            gcp.projects.IAMMember(
                f"{name}-nodes-{role.split('/')[-1]}",
                project=project,
                role=role,
                member=f"serviceAccount:{node_sa_email}",
                opts=pulumi.ResourceOptions(parent=self, depends_on=[node_sa]),
            )
            for role in NODE_ROLES
        ]
        # Nodes pull images: reader on our two repositories only.
        grants += [
            gcp.artifactregistry.RepositoryIamMember(
                f"{name}-nodes-pull-{image}",
                project=project,
                location=cfg.region,
                repository=repo_id,
                role="roles/artifactregistry.reader",
                member=f"serviceAccount:{node_sa_email}",
                opts=pulumi.ResourceOptions(parent=self, depends_on=[node_sa, registry.repositories[image]]),
            )
            for image, repo_id in registry.repository_ids.items()
        ]
        self.cluster = gcp.container.Cluster(
            name,
            name=cfg.name,
            location=cfg.region,
            network=network.id,
            subnetwork=subnet.id,
            min_master_version=cfg.cluster.kubernetes_version,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel="REGULAR"),
            # Node pools are managed separately; the default pool only bootstraps the control plane.
            remove_default_node_pool=True,
            initial_node_count=1,
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name="pods", services_secondary_range_name="services"
            ),
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                enable_private_endpoint=False,
                master_ipv4_cidr_block=GKE_CONTROL_PLANE_RANGE,
            ),
            master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[
                    gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                        cidr_block=c, display_name=f"allowed-{i}"
                    )
                    for i, c in enumerate(cfg.network.api_allowed_cidrs)
                ],
                gcp_public_cidrs_access_enabled=False,
            ),
            database_encryption=gcp.container.ClusterDatabaseEncryptionArgs(
                state="ENCRYPTED", key_name=key.key_name
            ),
            # Dataplane V2 (Cilium) enforces NetworkPolicy.
            datapath_provider="ADVANCED_DATAPATH",
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{project}.svc.id.goog"
            ),
            logging_config=gcp.container.ClusterLoggingConfigArgs(enable_components=CONTROL_PLANE_LOGS),
            enable_shielded_nodes=True,
            deletion_protection=cfg.is_prod,
            resource_labels=tags(cfg),
            node_config=gcp.container.ClusterNodeConfigArgs(service_account=node_sa_email),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*key.grants, *grants]),
        )
        pools = pulumi.ResourceOptions(parent=self, depends_on=[*grants, *key.grants])
        self.system_pool = _pool(
            f"{name}-system", cfg, pool="system", spec=cfg.cluster.system_pool, cluster=self.cluster,
            node_sa=node_sa_email, gpu=False, key_name=key.key_name, opts=pools,
        )  # fmt: skip
        self.serving_pool = _pool(
            f"{name}-serving", cfg, pool="serving", spec=cfg.cluster.serving_pool, cluster=self.cluster,
            node_sa=node_sa_email, gpu=False, key_name=key.key_name, opts=pools,
        )  # fmt: skip
        self.gpu_pool = _pool(
            f"{name}-gpu", cfg, pool="gpu", spec=cfg.cluster.gpu_pool, cluster=self.cluster,
            node_sa=node_sa_email, gpu=True, key_name=key.key_name, opts=pools,
        )  # fmt: skip
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate).apply(
                lambda args: exec_kubeconfig(
                    cfg.name, f"https://{args[0]}", args[1], "gke-gcloud-auth-plugin"
                )
            )
        )
        self.register_outputs({"name": self.cluster.name})
