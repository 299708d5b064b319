"""Argo Workflows on the system pool, and the retraining pipeline (pipeline/dag.py) as its WorkflowTemplate plus
a CronWorkflow for this stack's environment, running the stack's pinned training image.

The Workflow objects come from `pipeline.argo` (the same definition `python -m pipeline run` executes locally),
so the cluster's pipeline and the local one cannot drift apart.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.config import PlatformConfig
from infra.k8s.addons import ClusterAddons
from infra.k8s.monitoring import PUSHGATEWAY_URL, fsspec_url
from infra.shape import (
    INFERENCE_PREFIX,
    POOL_SELECTORS,
    REFERENCE_PREFIX,
    SERVICE_ACCOUNTS,
    HelmChart,
    PoolSelector,
)
from pipeline import argo as render
from pipeline import dag

ARGO_NAMESPACE = "argo"
# Chart 1.0.13 ships Argo Workflows v4.0.5: the version whose schema tests/infra/test_infra_argo.py validates the
# rendered objects against (hera 7.1's models are generated from argo-workflows-4.0.5.json).
ARGO_CHART_VERSION = "1.0.13"
MODEL_STORE_PREFIX = "model-store"
ARGO_METRICS_PORT = 9090
EXECUTOR_SECURITY: Mapping[str, Any] = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def argo_chart() -> HelmChart:
    system = dict(POOL_SELECTORS["system"].node_selector)
    return HelmChart(
        name="argo-workflows",
        chart="argo-workflows",
        repo="https://argoproj.github.io/argo-helm",
        version=ARGO_CHART_VERSION,
        namespace=ARGO_NAMESPACE,
        values={
            "crds": {"install": True},
            # Workflows run only where the pipeline's service account lives.
            "controller": {
                "nodeSelector": system,
                "workflowNamespaces": [render.NAMESPACE],
                # The pipeline's own gauge (pipeline/argo.py PIPELINE_METRIC, for dashboards) and Argo's metrics are
                # served by the controller; the prometheus chart scrapes annotated pods, as it does Triton and DCGM.
                # Off by default in the chart. The alerts read the Workflow objects instead (workflow_state.py).
                "metricsConfig": {"enabled": True, "port": ARGO_METRICS_PORT, "path": "/metrics"},
                "podAnnotations": {
                    "prometheus.io/scrape": "true",
                    "prometheus.io/port": str(ARGO_METRICS_PORT),
                    "prometheus.io/path": "/metrics",
                },
            },
            # No UI/API server: nothing to expose; `argo` CLI users go through the Kubernetes API.
            "server": {"enabled": False},
            # Argo's init and wait containers in every workflow pod: the workflow namespace enforces Pod Security
            # "restricted" (argoexec's USER is numeric, 8737), so they must satisfy it as the steps do.
            "executor": {"securityContext": copy.deepcopy(dict(EXECUTOR_SECURITY))},
        },
    )


def pipeline_params(cfg: PlatformConfig, buckets: Mapping[str, str]) -> dag.Params:
    models = buckets["models"]
    return dag.Params(
        preset="gpu",
        reference=fsspec_url(models, REFERENCE_PREFIX),
        current=fsspec_url(buckets["logs"], INFERENCE_PREFIX),
        store=fsspec_url(models, MODEL_STORE_PREFIX),
        env=cfg.environment,
        local="false",
        model=cfg.retraining.model,
        data=cfg.retraining.data,
        labels=",".join(cfg.retraining.labels),
        text_column=cfg.retraining.text_column,
        label_column=cfg.retraining.label_column,
    )


class RetrainingPipeline(pulumi.ComponentResource):
    """Argo's chart, the executor's permission, the WorkflowTemplate and the environment's CronWorkflow."""

    def __init__(
        self,
        name: str,
        *,
        environment: str,
        params: dag.Params,
        training_image: pulumi.Input[str],
        serving_image: pulumi.Input[str],
        labels: Mapping[str, str],
        after: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions,
        pod_labels: Mapping[str, str] | None = None,
        pools: Mapping[str, PoolSelector] | None = None,
    ) -> None:
        """``after``: what the objects in the training namespace need first (the namespace, its service account)."""
        super().__init__("eu-ml-platform:k8s:RetrainingPipeline", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=list(after))
        addons = ClusterAddons(f"{name}-argo", [argo_chart()], child)
        ns, sa = render.NAMESPACE, SERVICE_ACCOUNTS["trainer"].name
        # Argo's executor (a sidecar in each step's pod) reports step results as WorkflowTaskResults.
        role = k8s.rbac.v1.Role(
            f"{name}-executor",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="argo-executor", namespace=ns, labels=dict(labels)),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=["argoproj.io"], resources=["workflowtaskresults"], verbs=["create", "patch"]
                )
            ],
            opts=in_ns,
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-executor",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="argo-executor", namespace=ns, labels=dict(labels)),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="Role", name="argo-executor"
            ),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=sa, namespace=ns)],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role, *after]),
        )
        # The CRDs come with the chart; the objects live in the training namespace, so both exist first.
        ready = pulumi.ResourceOptions(parent=self, depends_on=[addons, *after])
        template = pulumi.Output.all(training_image, serving_image).apply(
            lambda images: render.workflow_template(
                training_image=images[0],
                environment=environment,
                params=dataclasses.replace(params, serving_image=images[1]),
                pod_labels=pod_labels,
                pools={p: sel.to_output() for p, sel in (pools or POOL_SELECTORS).items()},
                pushgateway_url=PUSHGATEWAY_URL,
            )
        )
        self.workflow_template = _custom(f"{name}-template", "WorkflowTemplate", template, labels, ready)
        cron = pulumi.Output.from_input(render.cron_workflow(environment))
        self.cron_workflow = _custom(f"{name}-cron", "CronWorkflow", cron, labels, ready)
        self.register_outputs({})


def _custom(
    name: str,
    kind: str,
    doc: pulumi.Output[dict[str, Any]],
    labels: Mapping[str, str],
    opts: pulumi.ResourceOptions,
) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name,
        api_version=render.API_VERSION,
        kind=kind,
        metadata=doc.apply(lambda d: {**d["metadata"], "labels": {**d["metadata"]["labels"], **labels}}),
        spec=doc.apply(lambda d: d["spec"]),
        opts=opts,
    )


def declare(
    cfg: PlatformConfig,
    buckets: Mapping[str, str],
    training_image: pulumi.Input[str],
    labels: Mapping[str, str],
    opts: pulumi.ResourceOptions,
    *,
    serving_image: pulumi.Input[str] = "",
    after: Sequence[pulumi.Resource] = (),
    pod_labels: Mapping[str, str] | None = None,
    pools: Mapping[str, PoolSelector] | None = None,
) -> RetrainingPipeline:
    """The one call infra/program.py makes; ``after``: the training namespace's component (TrainingWorkload)."""
    return RetrainingPipeline(
        f"{cfg.name}-pipeline",
        environment=cfg.environment,
        params=pipeline_params(cfg, buckets),
        training_image=training_image,
        serving_image=serving_image,
        labels=labels,
        after=after,
        opts=opts,
        pod_labels=pod_labels,
        pools=pools,
    )
