"""EKS: private nodes, KMS-encrypted secrets, audit logs, restricted API endpoint, network policies,
an on-demand system pool, a serving pool and a spot GPU pool that scales from zero."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from infra.aws import documents
from infra.config import PlatformConfig, PoolConfig
from infra.k8s.kubeconfig import exec_kubeconfig
from infra.naming import role_name, tags
from infra.shape import GPU_TAINT_KEY, GPU_TAINT_VALUE, POOL_LABEL

CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
NODE_POLICIES = ["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly", "AmazonEKS_CNI_Policy"]


# EKS's managed policy for cluster administrators (access entries), cluster-wide.
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


def gpu_node_template_tags(cfg: PlatformConfig) -> dict[str, str]:
    """Cluster-autoscaler node-template tags for the GPU group's ASG: with zero nodes the autoscaler learns
    the pool's label, taint and GPU count from them, so scale-from-zero for `nvidia.com/gpu` works.

    Only keys EKS does not write: EKS tags a managed node group's ASG with
    `k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster>` itself, and a Pulumi
    Tag on those keys would take them over (and delete them on destroy or replacement).
    """
    prefix = "k8s.io/cluster-autoscaler/node-template"
    return {
        f"{prefix}/label/{POOL_LABEL}": "gpu",
        f"{prefix}/taint/{GPU_TAINT_KEY}": f"{GPU_TAINT_VALUE}:NoSchedule",
        f"{prefix}/resources/nvidia.com/gpu": str(cfg.cluster.gpu_pool.gpus_per_node),
    }


def _node_group(
    name: str,
    cfg: PlatformConfig,
    *,
    pool: str,
    spec: PoolConfig,
    cluster: aws.eks.Cluster,
    node_role: aws.iam.Role,
    subnet_ids: Sequence[pulumi.Input[str]],
    gpu: bool,
    extra_tags: dict[str, str],
    key_arn: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
) -> aws.eks.NodeGroup:
    # Root volumes encrypted with the environment key (the node group's own disk_size would use the
    # account's default EBS key), and IMDSv2 only; hop limit 2 lets the spot-interruption handler read it.
    template = aws.ec2.LaunchTemplate(
        f"{name}-template",
        name_prefix=f"{cfg.name}-{pool}-",
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/xvda",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=spec.disk_gb,
                    volume_type="gp3",
                    encrypted="true",
                    kms_key_id=key_arn,
                    delete_on_termination="true",
                ),
            )
        ],
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=2
        ),
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags(cfg, pool=pool))
            for kind in ("instance", "volume")
        ],
        update_default_version=True,
        tags=tags(cfg, pool=pool),
        opts=pulumi.ResourceOptions(parent=opts.parent),
    )
    return aws.eks.NodeGroup(
        name,
        cluster_name=cluster.name,
        node_group_name_prefix=f"{cfg.name}-{pool}-",
        node_role_arn=node_role.arn,
        subnet_ids=list(subnet_ids),
        capacity_type="SPOT" if spec.spot else "ON_DEMAND",
        # Several instance types give the spot allocator more pools to draw from.
        instance_types=list(spec.machine_types),
        ami_type="AL2023_x86_64_NVIDIA" if gpu else "AL2023_x86_64_STANDARD",
        launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
            id=template.id, version=template.latest_version.apply(lambda v: str(v))
        ),
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(
            min_size=spec.min_nodes, max_size=spec.max_nodes, desired_size=max(spec.min_nodes, 0)
        ),
        update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
        labels={POOL_LABEL: pool},
        taints=(
            [aws.eks.NodeGroupTaintArgs(key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect="NO_SCHEDULE")]
            if gpu
            else None
        ),
        tags=tags(cfg, pool=pool, **extra_tags),
        # The autoscaler owns the desired size once the group exists.
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(ignore_changes=["scalingConfig.desiredSize"])
        ),
    )


class Cluster(pulumi.ComponentResource):
    cluster: aws.eks.Cluster
    kubeconfig: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        cluster_name: str,
        account_id: str,
        subnet_ids: Sequence[pulumi.Input[str]],
        key_arn: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:aws:Cluster", name, None, opts)
        assert cfg.aws is not None  # config.parse requires the aws section on aws stacks
        child = pulumi.ResourceOptions(parent=self)
        cluster_role = aws.iam.Role(
            f"{name}-control-plane",
            name=role_name(cfg, "eks-control-plane"),
            assume_role_policy=json.dumps(documents.service_trust_policy("eks.amazonaws.com")),
            tags=tags(cfg),
            opts=child,
        )
        cluster_policy = aws.iam.RolePolicyAttachment(
            f"{name}-control-plane",
            role=cluster_role.name,
            policy_arn="arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
            opts=child,
        )
        # Created first so EKS writes into a group with our retention and key instead of its default one.
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=f"/aws/eks/{cluster_name}/cluster",
            retention_in_days=cfg.audit_retention_days,
            kms_key_id=key_arn,
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.cluster = aws.eks.Cluster(
            name,
            name=cluster_name,
            version=cfg.cluster.kubernetes_version,
            role_arn=cluster_role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=list(subnet_ids),
                endpoint_private_access=True,
                # config.parse refuses an empty list: the public endpoint answers the listed CIDRs only;
                # nodes reach the API through the private endpoint.
                endpoint_public_access=True,
                public_access_cidrs=list(cfg.network.api_allowed_cidrs),
            ),
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                resources=["secrets"], provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key_arn)
            ),
            enabled_cluster_log_types=CONTROL_PLANE_LOGS,
            # Access comes from the access entries below only. Bootstrapping the creator would add a
            # second entry for the deployer role (EKS allows one per principal: the entry below would fail)
            # or give admin to whoever happened to run the first `up`.
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API", bootstrap_cluster_creator_admin_permissions=False
            ),
            deletion_protection=cfg.is_prod,
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster_policy, log_group]),
        )
        # Network policies are enforced by the VPC CNI's eBPF agent once this flag is on.
        aws.eks.Addon(
            f"{name}-vpc-cni",
            cluster_name=self.cluster.name,
            addon_name="vpc-cni",
            configuration_values=json.dumps({"enableNetworkPolicy": "true"}),
            # EKS installs vpc-cni itself on a new cluster, so the add-on's create meets existing fields:
            # without OVERWRITE the create fails with a conflict on the configuration values.
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags(cfg),
            opts=child,
        )
        self.pod_identity_agent = aws.eks.Addon(
            f"{name}-pod-identity-agent",
            cluster_name=self.cluster.name,
            addon_name="eks-pod-identity-agent",
            tags=tags(cfg),
            opts=child,
        )

        node_role = aws.iam.Role(
            f"{name}-nodes",
            name=role_name(cfg, "eks-nodes"),
            assume_role_policy=json.dumps(documents.service_trust_policy("ec2.amazonaws.com")),
            tags=tags(cfg),
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-nodes-{policy}",
                role=node_role.name,
                policy_arn=f"arn:aws:iam::aws:policy/{policy}",
                opts=child,
            )
            for policy in NODE_POLICIES
        ]
        groups = pulumi.ResourceOptions(parent=self, depends_on=attachments)
        cluster_tags = {
            f"k8s.io/cluster-autoscaler/{cluster_name}": "owned",
            "k8s.io/cluster-autoscaler/enabled": "true",
        }
        self.system_pool = _node_group(
            f"{name}-system", cfg, pool="system", spec=cfg.cluster.system_pool, cluster=self.cluster,
            node_role=node_role, subnet_ids=subnet_ids, gpu=False, extra_tags={}, key_arn=key_arn,
            opts=groups,
        )  # fmt: skip
        self.serving_pool = _node_group(
            f"{name}-serving", cfg, pool="serving", spec=cfg.cluster.serving_pool, cluster=self.cluster,
            node_role=node_role, subnet_ids=subnet_ids, gpu=False, extra_tags=cluster_tags, key_arn=key_arn,
            opts=groups,
        )  # fmt: skip
        self.gpu_pool = _node_group(
            f"{name}-gpu", cfg, pool="gpu", spec=cfg.cluster.gpu_pool, cluster=self.cluster,
            node_role=node_role, subnet_ids=subnet_ids, gpu=True, extra_tags={}, key_arn=key_arn,
            opts=groups,
        )  # fmt: skip
        # Managed node groups do not copy their tags to the Auto Scaling group, where the autoscaler reads them.
        asg_name = self.gpu_pool.resources.apply(_asg_name)
        for key, value in gpu_node_template_tags(cfg).items():
            aws.autoscaling.Tag(
                f"{name}-gpu-asg-tag-{_slug(key)}",
                autoscaling_group_name=asg_name,
                tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                opts=child,
            )

        # Who may use the Kubernetes API: the people's admin role and the role CI deploys with.
        self.access: list[pulumi.Resource] = []
        for who, role in (("admin", cfg.aws.admin_role), ("deployer", cfg.aws.deployer_role)):
            principal = documents.role_arn(account_id, role)
            entry = aws.eks.AccessEntry(
                f"{name}-access-{who}",
                cluster_name=self.cluster.name,
                principal_arn=principal,
                type="STANDARD",
                tags=tags(cfg),
                opts=child,
            )
            self.access.append(
                aws.eks.AccessPolicyAssociation(
                    f"{name}-access-{who}-admin",
                    cluster_name=self.cluster.name,
                    principal_arn=principal,
                    policy_arn=CLUSTER_ADMIN_POLICY,
                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]),
                )
            )
        self.oidc_issuer = self.cluster.identities.apply(_oidc_issuer)

        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(
                self.cluster.endpoint, self.cluster.certificate_authority.data, self.cluster.name
            ).apply(
                lambda args: exec_kubeconfig(
                    args[2],
                    args[0],
                    args[1],
                    "aws",
                    ["eks", "get-token", "--cluster-name", args[2], "--region", cfg.region],
                )
            )
        )
        self.register_outputs({"name": self.cluster.name})


def _oidc_issuer(identities: Sequence[aws.eks.outputs.ClusterIdentity] | None) -> str:
    oidcs = identities[0].oidcs if identities else None
    if not oidcs or not oidcs[0].issuer:
        raise ValueError("EKS reported no OIDC issuer for the cluster")
    return str(oidcs[0].issuer)


def _asg_name(resources: Sequence[aws.eks.outputs.NodeGroupResource] | None) -> str:
    first = resources[0] if resources else None
    names = [g.name for g in (first.autoscaling_groups or [])] if first else []
    if not names or not names[0]:
        raise ValueError("EKS reported no Auto Scaling group for the GPU node group")
    return names[0]


def _slug(key: str) -> str:
    return key.replace("k8s.io/cluster-autoscaler/", "").replace("/", "-").replace(".", "-").strip("-")
