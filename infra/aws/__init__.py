"""AWS implementation of the platform shape: `build(cfg)` declares everything and returns a CloudPlatform."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.aws import cluster_documents
from infra.aws.alarms import api_error_alarm
from infra.aws.audit import Audit, trail_arn
from infra.aws.block_storage import BlockStorage
from infra.aws.cluster import Cluster
from infra.aws.identity import Identities, PodRole
from infra.aws.keys import EnvironmentKey
from infra.aws.network import Network
from infra.aws.registry import Registry
from infra.aws.storage import Buckets
from infra.config import PlatformConfig
from infra.k8s.versions import cluster_autoscaler
from infra.naming import role_name, tags
from infra.shape import DATA_BUCKETS, POOL_SELECTORS, CloudPlatform, HelmChart, ServiceAccountRef

CLUSTER_AUTOSCALER_SA = ServiceAccountRef("kube-system", "cluster-autoscaler")
# EKS Pod Identity: the agent on every node serves the pod's credentials on this link-local address
# (docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html); the SDKs then call STS and S3 over HTTPS.
POD_IDENTITY_AGENT = {"cidr": "169.254.170.23/32", "ports": [("TCP", 80)]}


def build(cfg: PlatformConfig) -> CloudPlatform:
    provider = aws.Provider(
        "aws",
        region=cfg.region,
        # Belt and braces: anything taggable we did not tag explicitly still gets the required tags.
        default_tags=aws.ProviderDefaultTagsArgs(tags=tags(cfg)),
    )
    opts = pulumi.ResourceOptions(provider=provider)
    # Invokes run during a real preview too, so the account id (and ARNs built from it) are known there.
    account_id = aws.get_caller_identity(opts=pulumi.InvokeOptions(provider=provider)).account_id
    cluster_name = cfg.name
    trail = trail_arn(cfg, account_id)

    key = EnvironmentKey(f"{cfg.name}-key", cfg, account_id, trail, opts)
    buckets = Buckets(
        f"{cfg.name}-buckets", cfg, key_arn=key.arn, account_id=account_id, trail_arn=trail, opts=opts
    )
    registry = Registry(f"{cfg.name}-registry", cfg, key_arn=key.arn, account_id=account_id, opts=opts)
    network = Network(f"{cfg.name}-network", cfg, cluster_name, opts)
    cluster = Cluster(
        f"{cfg.name}-eks",
        cfg,
        cluster_name=cluster_name,
        account_id=account_id,
        subnet_ids=network.private_subnet_ids,
        key_arn=key.arn,
        opts=opts,
    )
    bindings = pulumi.ResourceOptions(provider=provider, depends_on=[cluster.pod_identity_agent])
    identities = Identities(
        f"{cfg.name}-identities",
        cfg,
        account_id=account_id,
        cluster_name=cluster.cluster.name,
        bucket_names=buckets.names,
        repository_arns=registry.repository_arns,
        key_arn=key.arn,
        opts=bindings,
    )
    PodRole(
        f"{cfg.name}-cluster-autoscaler",
        cfg,
        role_name=role_name(cfg, "cluster-autoscaler"),
        account_id=account_id,
        cluster_name=cluster.cluster.name,
        service_account=CLUSTER_AUTOSCALER_SA,
        policy=cluster_documents.cluster_autoscaler_policy(cluster_name, cfg.region, account_id),
        key_policy=None,
        opts=bindings,
    )
    # PersistentVolumes (Prometheus, Alertmanager): the EBS CSI driver, once the system pool can run it.
    block_storage = BlockStorage(
        f"{cfg.name}-block-storage",
        cfg,
        cluster_name=cluster.cluster.name,
        role=identities.ebs_csi_role,
        key_arn=key.arn,
        after=[cluster.system_pool],
        opts=opts,
    )
    Audit(
        f"{cfg.name}-audit",
        cfg,
        log_bucket=buckets.buckets["logs"].bucket.bucket,
        data_bucket_names=[buckets.names[p] for p in DATA_BUCKETS],
        key_arn=key.arn,
        depends_on=[buckets.buckets["logs"]],
        opts=opts,
    )
    api_error_alarm(cfg, cluster.cluster.name, key.arn, opts)
    return CloudPlatform(
        cloud="aws",
        cluster_name=cluster.cluster.name,
        kubeconfig=cluster.kubeconfig,
        bucket_uris=buckets.uris,
        image_repositories=registry.urls,
        # EKS 1.30+ ships no default StorageClass (infra/aws/block_storage.py): the shared layer declares this.
        default_storage_class=block_storage.storage_class,
        cluster_endpoint=cluster.cluster.endpoint,
        registry=registry.host,
        key_ids={"environment": key.arn},
        identity_principals={identity: r.role.arn for identity, r in identities.roles.items()},
        budget_job=identities.budget_job,
        extra_outputs={"oidc_issuer": cluster.oidc_issuer},
        addons=addons(cfg, cluster_name),
        spot_drain="aws-node-termination-handler (spot interruption notice, 2 minutes)",
        identity_egress=[POD_IDENTITY_AGENT],
        # The Kubernetes provider needs nodes for its charts and API access for whoever runs `up`.
        # The EBS CSI add-on too: the default StorageClass's volumes need its driver.
        depends_on=[cluster.system_pool, *cluster.access, block_storage.addon],
    )


def addons(cfg: PlatformConfig, cluster_name: str) -> list[HelmChart]:
    system = dict(POOL_SELECTORS["system"].node_selector)
    # The autoscaler's minor must be the cluster's (infra/k8s/versions.py); the tag pins it explicitly.
    autoscaler = cluster_autoscaler(cfg.cluster.kubernetes_version)
    return [
        HelmChart(
            name="cluster-autoscaler",
            chart="cluster-autoscaler",
            repo="https://kubernetes.github.io/autoscaler",
            version=autoscaler.chart,
            namespace=CLUSTER_AUTOSCALER_SA.namespace,
            values={
                "image": {"tag": autoscaler.image_tag},
                "autoDiscovery": {"clusterName": cluster_name},
                "awsRegion": cfg.region,
                "rbac": {"serviceAccount": {"create": True, "name": CLUSTER_AUTOSCALER_SA.name}},
                "nodeSelector": system,
                "extraArgs": {"balance-similar-node-groups": True, "skip-nodes-with-local-storage": False},
            },
        ),
        # Spot interruption: the handler watches instance metadata on spot nodes for the 2-minute notice
        # and rebalance recommendations, then cordons and drains, so the trainer gets SIGTERM and checkpoints.
        HelmChart(
            name="aws-node-termination-handler",
            chart="aws-node-termination-handler",
            repo="https://aws.github.io/eks-charts",
            version="0.21.0",
            namespace="kube-system",
            values={
                "enableSpotInterruptionDraining": True,
                "enableRebalanceMonitoring": True,
                "enableRebalanceDraining": False,
                "nodeSelector": {"eks.amazonaws.com/capacityType": "SPOT"},
                "daemonsetTolerations": [{"operator": "Exists"}],
            },
        ),
    ]
