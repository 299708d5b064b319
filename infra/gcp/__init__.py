"""GCP implementation of the platform shape: `build(cfg)` declares everything and returns a CloudPlatform.

Key and bucket references are the deterministic resource names GCP assigns (`projects/.../cryptoKeys/...`,
bucket names) with explicit `depends_on`, so a preview already shows which key encrypts what.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig
from infra.gcp.audit import Audit
from infra.gcp.cluster import Cluster
from infra.gcp.identity import Identities
from infra.gcp.keys import EnvironmentKey
from infra.gcp.registry import Registry
from infra.gcp.storage import Buckets
from infra.naming import tags
from infra.shape import CloudPlatform


def build(cfg: PlatformConfig) -> CloudPlatform:
    assert cfg.gcp_project is not None  # config.parse requires it for gcp
    project = cfg.gcp_project
    provider = gcp.Provider("gcp", project=project, region=cfg.region, default_labels=tags(cfg))
    opts = pulumi.ResourceOptions(provider=provider)
    invoke = pulumi.InvokeOptions(provider=provider)
    project_number = gcp.organizations.get_project(project_id=project, opts=invoke).number

    key = EnvironmentKey(f"{cfg.name}-key", cfg, project=project, project_number=project_number, opts=opts)
    buckets = Buckets(f"{cfg.name}-buckets", cfg, key=key, opts=opts)
    registry = Registry(f"{cfg.name}-registry", cfg, project=project, key=key, opts=opts)
    cluster = Cluster(f"{cfg.name}-gke", cfg, project=project, key=key, registry=registry, opts=opts)
    identities = Identities(
        f"{cfg.name}-identities",
        cfg,
        project=project,
        buckets=buckets,
        registry=registry,
        opts=pulumi.ResourceOptions(provider=provider, depends_on=[cluster.cluster]),
    )
    Audit(f"{cfg.name}-audit", cfg, project=project, project_number=project_number, key=key, opts=opts)
    return CloudPlatform(
        cloud="gcp",
        cluster_name=cluster.cluster.name,
        kubeconfig=cluster.kubeconfig,
        bucket_uris=buckets.uris,
        image_repositories=registry.urls,
        sa_annotations={
            identity: {"iam.gke.io/gcp-service-account": email}
            for identity, email in identities.emails.items()
        },
        # GKE installs NVIDIA's device plugin and drivers (gpu_driver_installation_config) itself; its
        # autoscaler is built in and handles spot preemption with graceful node shutdown.
        needs_device_plugin=False,
        depends_on=[cluster.system_pool],
    )
