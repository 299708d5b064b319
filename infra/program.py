"""The whole program: the chosen cloud's platform, then the shared Kubernetes layer, then the outputs.

`build(cfg)` is what `__main__.py` runs and what the tests and the offline plan call under mocks.
"""

from __future__ import annotations

import importlib
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from infra import lifecycle
from infra.config import PlatformConfig
from infra.k8s import argo, budget, monitoring
from infra.k8s.addons import KEDA, ClusterAddons, device_plugin, monitoring_charts, prometheus_storage
from infra.k8s.monitoring_stack import MonitoringArgs, MonitoringStack
from infra.k8s.serving import ServingArgs, TritonServing
from infra.k8s.storage import default_storage_class
from infra.k8s.workloads import CiDeployer, TrainingWorkload
from infra.shape import (
    DRIFT_PREFIX,
    GPU_TAINT,
    INFERENCE_PREFIX,
    POOL_LABEL,
    RAW_SAMPLE_PREFIX,
    REFERENCE_PREFIX,
    SERVICE_ACCOUNTS,
    CloudPlatform,
    image_reference,
)


def build_cloud(cfg: PlatformConfig) -> CloudPlatform:
    # Only the chosen cloud's SDK is imported (each takes a noticeable share of start-up time).
    module = importlib.import_module(f"infra.{cfg.cloud}")
    platform: CloudPlatform = module.build(cfg)
    return platform


def build(cfg: PlatformConfig) -> dict[str, Any]:
    lifecycle.register(prod=cfg.is_prod)
    platform = build_cloud(cfg)
    labels = {"app.kubernetes.io/part-of": "eu-ml-platform", "platform.eu-ml/environment": cfg.environment}
    provider = k8s.Provider(
        "k8s",
        kubeconfig=platform.kubeconfig,
        delete_unreachable=not cfg.is_prod,
        opts=pulumi.ResourceOptions(depends_on=platform.depends_on),
    )
    opts = pulumi.ResourceOptions(provider=provider)
    selectors = platform.pool_selectors()
    # Every stack deploys its environment's retraining pipeline (argo.declare below): its rules say so, for the alert
    # on a pipeline deleted whole.
    alerting = monitoring.prometheus_values(
        monitoring.alert_rule_groups(pipeline_environment=cfg.environment)
    )
    charts = [
        *platform.addons,
        *monitoring_charts(prometheus_storage(cfg), alerting),
        monitoring.grafana_chart(),
        monitoring.dcgm_exporter_chart(selectors["gpu"]),
    ]
    if platform.needs_device_plugin:
        charts.append(device_plugin(selectors["gpu"]))
    if cfg.serving.scale_to_zero:
        charts.append(KEDA)
    # The class PVCs without one get (Prometheus server, Alertmanager); none where the cloud ships one.
    storage = default_storage_class(f"{cfg.name}-storage", platform.default_storage_class, labels, opts)
    addons = ClusterAddons(f"{cfg.name}-addons", charts, opts, after=storage)

    serving_image = image_reference(platform.image_repositories["serving"], cfg.serving.image)
    training_image = image_reference(platform.image_repositories["training"], cfg.training_image)
    buckets = {purpose: str(uri) for purpose, uri in platform.bucket_uris.items()}
    storage_env = monitoring.storage_env(buckets)
    serving = TritonServing(
        f"{cfg.name}-serving",
        ServingArgs(
            image=serving_image,
            min_replicas=cfg.serving.min_replicas,
            max_replicas=cfg.serving.max_replicas,
            queue_time_target_us=cfg.serving.queue_time_target_us,
            gpu=cfg.serving.gpu,
            cpu=cfg.serving.cpu,
            memory=cfg.serving.memory,
            scale_to_zero=cfg.serving.scale_to_zero,
            sa_annotations=platform.sa_annotations.get("server", {}),
            pod_labels=platform.pod_labels.get("server", {}),
            labels=labels,
            placement=selectors["gpu" if cfg.serving.gpu else "serving"],
            identity_egress=tuple(platform.identity_egress),
            env=serving_env(cfg, buckets, storage_env),
            # The HPA's metric and the ScaledObject's CRD come from the add-ons.
            after=(addons,),
        ),
        opts,
    )
    gpu = cfg.cluster.gpu_pool
    training = TrainingWorkload(
        f"{cfg.name}-training",
        gpu_quota=gpu.max_nodes * gpu.gpus_per_node,
        annotations=platform.sa_annotations.get("trainer", {}),
        labels=labels,
        opts=opts,
    )
    CiDeployer(
        f"{cfg.name}-ci",
        annotations=platform.sa_annotations.get("ci-deployer", {}),
        labels=labels,
        serving_namespace=serving.namespace,
        opts=opts,
    )

    MonitoringStack(
        f"{cfg.name}-monitoring",
        MonitoringArgs(
            alertmanager_config=pulumi.Output.secret(yaml.safe_dump(monitoring.alertmanager_document(cfg))),
            receiver_annotations=monitoring.receiver_annotations(cfg),
            alertmanager_image=cfg.monitoring.alertmanager_image,
            dashboards=monitoring.dashboards(),
            image=training_image,
            schedule=cfg.monitoring.drift_schedule,
            window=cfg.monitoring.drift_window,
            model=cfg.retraining.model,
            reference_url=monitoring.fsspec_url(buckets["models"], REFERENCE_PREFIX),
            current_url=monitoring.fsspec_url(buckets["logs"], INFERENCE_PREFIX),
            out_url=monitoring.fsspec_url(buckets["logs"], DRIFT_PREFIX),
            storage_env=storage_env,
            sa_annotations=platform.sa_annotations.get("monitor", {}),
            pod_labels=platform.pod_labels.get("monitor", {}),
            identity_egress=tuple(platform.identity_egress),
            labels=labels,
            # Alertmanager's volumeClaimTemplates use the default StorageClass.
            after=(addons, *storage),
        ),
        opts,
    )

    # The budget cost job (infra/k8s/budget.py): every cloud (GCP: from the budget's Pub/Sub notifications).
    budget.declare(cfg, platform.budget_job, training_image, labels, opts,
                   identity_egress=tuple(platform.identity_egress), after=(addons,))  # fmt: skip
    # Retraining pipeline (pipeline/, infra/k8s/argo.py): its objects live in the training namespace, after it.
    argo.declare(cfg, buckets, training_image, labels, opts, serving_image=serving_image, after=[training],
                 pod_labels=platform.pod_labels.get("trainer", {}), pools=selectors)  # fmt: skip
    outputs = stack_outputs(cfg, platform, serving.endpoint, serving_image, training_image)
    for name, value in outputs.items():
        pulumi.export(name, value)
    return outputs


def serving_env(cfg: PlatformConfig, buckets: dict[str, str], storage_env: dict[str, str]) -> dict[str, str]:
    """Triton's monitoring environment (monitoring/environment.py): sampling and where records go."""
    m = cfg.monitoring
    return {
        "MONITORING_SAMPLE_RATE": f"{m.sample_rate:g}",
        "MONITORING_RECORDS_URL": monitoring.fsspec_url(buckets["logs"], INFERENCE_PREFIX),
        "MONITORING_RAW_SAMPLE_RATE": f"{m.raw_sample_rate:g}",
        "MONITORING_RAW_URL": monitoring.fsspec_url(buckets["logs"], RAW_SAMPLE_PREFIX),
        **storage_env,
    }


def stack_outputs(
    cfg: PlatformConfig,
    platform: CloudPlatform,
    serving_endpoint: dict[str, str],
    serving_image: pulumi.Output[str],
    training_image: pulumi.Output[str],
) -> dict[str, Any]:
    """What job submitters, CI and promotion read after `up` (infra/README.md, "Stack outputs")."""
    gpu = cfg.cluster.gpu_pool
    selectors = platform.pool_selectors()
    return {
        "stack": cfg.stack,
        "cloud": cfg.cloud,
        "environment": cfg.environment,
        "region": cfg.region,
        "cluster_name": platform.cluster_name,
        "kubeconfig": platform.kubeconfig,
        "bucket_uris": dict(platform.bucket_uris),
        "checkpoint_bucket_uri": platform.bucket_uris["checkpoints"],
        "image_repositories": dict(platform.image_repositories),
        "serving_image": serving_image,
        "training_image": training_image,
        "service_accounts": {
            identity: {"namespace": ref.namespace, "name": ref.name}
            for identity, ref in SERVICE_ACCOUNTS.items()
        },
        "trainer_namespace": SERVICE_ACCOUNTS["trainer"].namespace,
        "trainer_service_account": SERVICE_ACCOUNTS["trainer"].name,
        "trainer_pod_labels": dict(platform.pod_labels.get("trainer", {})),
        "serving_endpoint": serving_endpoint,
        "pool_selectors": {pool: sel.to_output() for pool, sel in selectors.items()},
        "gpu_pool": {
            "node_label": {POOL_LABEL: "gpu"},
            # The program's own taint (unchanged since the first release) and every taint the pool's
            # nodes carry on this cloud (AKS adds its spot taint): a pod must tolerate all of `taints`.
            "taint": str(GPU_TAINT),
            "taints": [t.to_output() for t in platform.pool_taints()["gpu"]],
            "gpu_type": gpu.gpu_type,
            "gpus_per_node": gpu.gpus_per_node,
            "max_nodes": gpu.max_nodes,
            "spot_drain": platform.spot_drain,
        },
        "cluster_endpoint": platform.cluster_endpoint,
        "registry": platform.registry,
        "key_ids": dict(platform.key_ids),
        "identity_principals": dict(platform.identity_principals),
        # Where alerts go (receiver names, never keys): the policy pack requires a pager in prod.
        "alerting": {
            "receivers": sorted(cfg.monitoring.receivers),
            "paging": bool(set(cfg.monitoring.receivers) & set(monitoring.PAGERS)),  # a heartbeat is no pager
        },
        "drift_schedule": cfg.monitoring.drift_schedule,
        **platform.extra_outputs,
    }
