"""GCP implementation of the platform shape: `build(cfg)` declares everything and returns a CloudPlatform.

Key and bucket references are the deterministic resource names GCP assigns (`projects/.../cryptoKeys/...`,
bucket names) with explicit `depends_on`, so a preview already shows which key encrypts what.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig
from infra.gcp import roles
from infra.gcp.alarms import serving_restart_policy
from infra.gcp.audit import Audit
from infra.gcp.budget import BudgetNotifications
from infra.gcp.cluster import Cluster
from infra.gcp.identity import Identities
from infra.gcp.keys import EnvironmentKey
from infra.gcp.registry import Registry
from infra.gcp.services import ProjectServices
from infra.gcp.storage import Buckets
from infra.naming import tags
from infra.shape import CloudPlatform

# GKE Workload Identity: pods get tokens from the GKE metadata server, which Dataplane V2 clusters serve on
# 169.254.169.252:988 behind the usual 169.254.169.254:80 (GKE docs, "Workload Identity Federation for GKE":
# allow both in network policies).
METADATA_SERVER = [
    {"cidr": "169.254.169.254/32", "ports": [("TCP", 80)]},
    {"cidr": "169.254.169.252/32", "ports": [("TCP", 988)]},
]


def build(cfg: PlatformConfig) -> CloudPlatform:
    assert cfg.gcp_project is not None  # config.parse requires it for gcp
    project = cfg.gcp_project
    # Names the config cannot judge alone (they join the stack name): refused before any resource exists.
    roles.check_account_ids(cfg)
    provider = gcp.Provider("gcp", project=project, region=cfg.region, default_labels=tags(cfg))
    opts = pulumi.ResourceOptions(provider=provider)
    invoke = pulumi.InvokeOptions(provider=provider)
    project_number = gcp.organizations.get_project(project_id=project, opts=invoke).number
    # APIs first; every later GCP resource waits for the APIs of its type (a fresh project races otherwise).
    services = ProjectServices(f"{cfg.name}-services", project=project, opts=opts)
    services.wait_for_apis()
    # Billing budgets are a billing-account API: with user credentials (gcloud auth application-default
    # login) Google needs a quota project to bill the call to, or it answers 403. This provider sends the
    # stack's project as that quota project, for the budget only.
    billing = gcp.Provider(
        "gcp-billing", project=project, region=cfg.region, billing_project=project, user_project_override=True
    )

    key = EnvironmentKey(
        f"{cfg.name}-key", cfg, project=project, project_number=project_number, services=services, opts=opts
    )
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
    # The budget's status goes to a Pub/Sub topic the budget CronJob drains (GCP's Budgets API has no spend).
    notifications = BudgetNotifications(
        f"{cfg.name}-budget-notifications",
        cfg,
        project=project,
        opts=pulumi.ResourceOptions(provider=provider, depends_on=[cluster.cluster]),
    )
    Audit(
        f"{cfg.name}-audit",
        cfg,
        project=project,
        project_number=project_number,
        key=key,
        billing_provider=billing,
        notifications=notifications,
        opts=opts,
    )
    serving_restart_policy(
        cfg, project, cfg.name, pulumi.ResourceOptions(provider=provider, depends_on=[cluster.cluster])
    )
    return CloudPlatform(
        cloud="gcp",
        cluster_name=cluster.cluster.name,
        kubeconfig=cluster.kubeconfig,
        bucket_uris=buckets.uris,
        image_repositories=registry.urls,
        # GKE ships a default StorageClass, `standard-rwo` (Compute Engine persistent disk CSI driver,
        # pd-balanced), so PVCs without a class bind (cloud.google.com/kubernetes-engine/docs/how-to/
        # persistent-volumes/gce-pd-csi-driver): nothing to declare.
        default_storage_class=None,
        cluster_endpoint=cluster.cluster.endpoint.apply(lambda host: f"https://{host}"),
        registry=registry.host,
        key_ids={"environment": key.key_name},
        identity_principals=dict(identities.emails),
        sa_annotations={
            identity: {"iam.gke.io/gcp-service-account": email}
            for identity, email in identities.emails.items()
        },
        # GKE installs NVIDIA's device plugin and drivers (gpu_driver_installation_config) itself; its
        # autoscaler is built in and handles spot preemption with graceful node shutdown.
        needs_device_plugin=False,
        spot_drain="GKE graceful node shutdown (Spot preemption notice, 30 s)",
        identity_egress=METADATA_SERVER,
        budget_job=notifications.job,
        depends_on=[cluster.system_pool],
    )
