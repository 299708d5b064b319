"""Triton Inference Server on the cluster: hardened Deployment, probes, PDB, Service, NetworkPolicy and
an autoscaling/v2 HPA on queue time per request per pod (or, in dev, a KEDA ScaledObject to zero)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.k8s import autoscaling
from infra.k8s.addons import MONITORING_NAMESPACE, PROMETHEUS_URL
from infra.k8s.netpol import default_deny, dns_egress, identity_and_https_egress
from infra.shape import POOL_SELECTORS, SERVICE_ACCOUNTS, PoolSelector

APP = "triton"
MODEL = "sentiment"
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
READY_PATH, LIVE_PATH = "/v2/health/ready", "/v2/health/live"
# Model load (ONNX Runtime session + tokenizer, or a GPU warm-up) can take minutes on a cold node:
# the startup probe allows STARTUP_PERIOD_S * STARTUP_FAILURES = 10 minutes before liveness applies.
STARTUP_PERIOD_S, STARTUP_FAILURES = 10, 60
# Pod shutdown (scale-down, rollout, node drain), from tritonserver 2.51's measured behaviour
# (tests/serving/test_serving_shutdown.py): on SIGTERM it closes its HTTP listener at once (new
# connections and /v2/health/ready are refused) while in-flight requests finish; then it waits for open
# HTTP connections, in-flight inferences and model unload, all within one --exit-timeout-secs budget, and
# exits at most about a second past it. Kubernetes sends SIGTERM as it starts removing the pod from the
# Service's endpoints; kube-proxy and ingress controllers take seconds to stop routing to it. So the
# preStop hook keeps Triton serving (and ready: the only pod left still gets traffic) while endpoints
# converge, and the grace period covers hook + exit budget + slack, or SIGKILL cuts in-flight requests.
# 10 s: kube-proxy syncs in about a second, ingress controllers in a few; GKE gives a spot node's pods 15 s
# of graceful shutdown in all, and in-flight requests need the rest.
PRESTOP_SLEEP_S = 10
# The serving image's `--exit-timeout-secs` (containers/serving/Dockerfile, checked equal by the infra
# tests): Triton's default is 30 s; saturated, a request queued 65-823 ms (serving/README.md): 15 s is ample.
TRITON_EXIT_TIMEOUT_S = 15
# Past the exit budget: Triton's own overshoot (<= 1 s measured) and process teardown.
SHUTDOWN_SLACK_S = 5
TERMINATION_GRACE_S = PRESTOP_SLEEP_S + TRITON_EXIT_TIMEOUT_S + SHUTDOWN_SLACK_S
# Clients outside the namespace must carry this namespace label to reach Triton.
CLIENT_NAMESPACE_LABEL = "platform.eu-ml/triton-client"
# KEDA (dev scale-to-zero): keep one replica during Madrid office hours, none at night and at weekends.
WORKING_HOURS = {"timezone": "Europe/Madrid", "start": "0 8 * * 1-5", "end": "0 20 * * 1-5"}
# The serving image's USER (containers/serving/Dockerfile): the pod runs as the user the image was built for.
SERVING_UID = 10002
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}


@dataclass(frozen=True, slots=True)
class ServingArgs:
    image: pulumi.Input[str]
    min_replicas: int
    max_replicas: int
    queue_time_target_us: int
    gpu: bool
    cpu: str
    memory: str
    scale_to_zero: bool
    sa_annotations: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    # Where the pods run: the serving pool, or the GPU pool when `gpu` (selector + tolerations).
    placement: PoolSelector = POOL_SELECTORS["serving"]
    # Endpoints the pod's cloud identity needs ({"cidr", "ports": [(protocol, port)]}; CloudPlatform).
    identity_egress: tuple[Mapping[str, Any], ...] = ()
    # Environment of the Triton container: the monitoring contract (monitoring/environment.py).
    env: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # Resources that must exist first: the add-ons serving the HPA metric and KEDA's CRDs.
    after: tuple[pulumi.Resource, ...] = ()


def _probe(path: str, period: int, failures: int) -> k8s.core.v1.ProbeArgs:
    return k8s.core.v1.ProbeArgs(
        http_get=k8s.core.v1.HTTPGetActionArgs(path=path, port="http"),
        period_seconds=period,
        failure_threshold=failures,
        timeout_seconds=5,
    )


class TritonServing(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace
    deployment: k8s.apps.v1.Deployment
    service: k8s.core.v1.Service
    endpoint: dict[str, str]

    def __init__(self, name: str, args: ServingArgs, opts: pulumi.ResourceOptions) -> None:
        super().__init__("eu-ml-platform:k8s:TritonServing", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        sa_ref = SERVICE_ACCOUNTS["server"]
        ns = sa_ref.namespace
        labels = {"app.kubernetes.io/name": APP, "app.kubernetes.io/component": "serving", **args.labels}
        selector = {"app.kubernetes.io/name": APP}
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels={**RESTRICTED, **args.labels}),
            opts=child,
        )
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace, *args.after])
        meta = lambda n: k8s.meta.v1.ObjectMetaArgs(name=n, namespace=ns, labels=labels)  # noqa: E731
        sa = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=sa_ref.name, namespace=ns, labels=labels, annotations=dict(args.sa_annotations)
            ),
            automount_service_account_token=False,
            opts=in_ns,
        )
        placement = args.placement
        # Limits equal requests: Guaranteed QoS, so a busy neighbour cannot slow inference down.
        limits = {"cpu": args.cpu, "memory": args.memory, **({"nvidia.com/gpu": "1"} if args.gpu else {})}
        container = k8s.core.v1.ContainerArgs(
            name=APP,
            image=args.image,
            image_pull_policy="IfNotPresent",
            env=[k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in sorted(args.env.items())] or None,
            ports=[
                k8s.core.v1.ContainerPortArgs(name="http", container_port=HTTP_PORT),
                k8s.core.v1.ContainerPortArgs(name="grpc", container_port=GRPC_PORT),
                k8s.core.v1.ContainerPortArgs(name="metrics", container_port=METRICS_PORT),
            ],
            startup_probe=_probe(READY_PATH, STARTUP_PERIOD_S, STARTUP_FAILURES),
            readiness_probe=_probe(READY_PATH, 5, 3),
            liveness_probe=_probe(LIVE_PATH, 10, 3),
            # The kubelet's own sleep (Kubernetes >= 1.30): no `sleep` binary needed in the image.
            lifecycle=k8s.core.v1.LifecycleArgs(
                pre_stop=k8s.core.v1.LifecycleHandlerArgs(
                    sleep=k8s.core.v1.SleepActionArgs(seconds=PRESTOP_SLEEP_S)
                )
            ),
            resources=k8s.core.v1.ResourceRequirementsArgs(
                requests={"cpu": args.cpu, "memory": args.memory}, limits=limits
            ),
            security_context=k8s.core.v1.SecurityContextArgs(
                run_as_non_root=True,
                read_only_root_filesystem=True,
                allow_privilege_escalation=False,
                capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
            ),
            # Read-only root: Triton's python backend writes to /tmp and shares tensors through /dev/shm.
            volume_mounts=[
                k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
                k8s.core.v1.VolumeMountArgs(name="shm", mount_path="/dev/shm"),
            ],
        )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta(APP),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                # The autoscaler owns the replica count after creation.
                replicas=args.min_replicas if args.min_replicas > 0 else 1,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                strategy=k8s.apps.v1.DeploymentStrategyArgs(
                    type="RollingUpdate",
                    rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(max_surge=1, max_unavailable=0),
                ),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        labels={**labels, **args.pod_labels},
                        annotations={
                            "prometheus.io/scrape": "true",
                            "prometheus.io/port": str(METRICS_PORT),
                            "prometheus.io/path": "/metrics",
                        },
                    ),
                    spec=k8s.core.v1.PodSpecArgs(
                        service_account_name=sa_ref.name,
                        automount_service_account_token=False,
                        security_context=k8s.core.v1.PodSecurityContextArgs(
                            run_as_non_root=True,
                            run_as_user=SERVING_UID,
                            run_as_group=SERVING_UID,
                            fs_group=SERVING_UID,
                            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                        ),
                        node_selector=dict(placement.node_selector),
                        tolerations=[
                            k8s.core.v1.TolerationArgs(
                                key=t["key"], operator=t["operator"], value=t.get("value"), effect=t["effect"]
                            )
                            for t in placement.tolerations
                        ]
                        or None,
                        topology_spread_constraints=[
                            k8s.core.v1.TopologySpreadConstraintArgs(
                                max_skew=1,
                                topology_key="topology.kubernetes.io/zone",
                                when_unsatisfiable="ScheduleAnyway",
                                label_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                            )
                        ],
                        termination_grace_period_seconds=TERMINATION_GRACE_S,
                        containers=[container],
                        volumes=[
                            k8s.core.v1.VolumeArgs(
                                name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="1Gi")
                            ),
                            k8s.core.v1.VolumeArgs(
                                name="shm",
                                empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(
                                    medium="Memory", size_limit="512Mi"
                                ),
                            ),
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions.merge(
                in_ns, pulumi.ResourceOptions(depends_on=[sa], ignore_changes=["spec.replicas"])
            ),
        )
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata=meta(APP),
            spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(
                max_unavailable=1, selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector)
            ),
            opts=in_ns,
        )
        self.service = k8s.core.v1.Service(
            f"{name}-service",
            metadata=meta(APP),
            spec=k8s.core.v1.ServiceSpecArgs(
                type="ClusterIP",
                selector=selector,
                ports=[
                    k8s.core.v1.ServicePortArgs(name="http", port=HTTP_PORT, target_port="http"),
                    k8s.core.v1.ServicePortArgs(name="grpc", port=GRPC_PORT, target_port="grpc"),
                    k8s.core.v1.ServicePortArgs(name="metrics", port=METRICS_PORT, target_port="metrics"),
                ],
            ),
            opts=in_ns,
        )
        self._network_policies(name, ns, selector, args.identity_egress, in_ns)
        if args.scale_to_zero:
            self._scaled_object(name, ns, args, in_ns)
        else:
            self._hpa(name, ns, args, in_ns, labels)
        self.endpoint = {
            "http": f"http://{APP}.{ns}.svc.cluster.local:{HTTP_PORT}",
            "grpc": f"{APP}.{ns}.svc.cluster.local:{GRPC_PORT}",
            "model": MODEL,
        }
        self.register_outputs({"endpoint": self.endpoint})

    def _network_policies(
        self,
        name: str,
        ns: str,
        selector: Mapping[str, str],
        identity_egress: Sequence[Mapping[str, Any]],
        opts: pulumi.ResourceOptions,
    ) -> None:
        default_deny(name, ns, opts)
        k8s.networking.v1.NetworkPolicy(
            f"{name}-netpol",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=APP, namespace=ns),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(selector)),
                policy_types=["Ingress", "Egress"],
                ingress=[
                    k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                        from_=[
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                                    match_labels={CLIENT_NAMESPACE_LABEL: "true"}
                                )
                            ),
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                pod_selector=k8s.meta.v1.LabelSelectorArgs()
                            ),
                        ],
                        ports=[
                            k8s.networking.v1.NetworkPolicyPortArgs(port=HTTP_PORT, protocol="TCP"),
                            k8s.networking.v1.NetworkPolicyPortArgs(port=GRPC_PORT, protocol="TCP"),
                        ],
                    ),
                    k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                        from_=[
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                                    match_labels={"kubernetes.io/metadata.name": MONITORING_NAMESPACE}
                                )
                            )
                        ],
                        ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=METRICS_PORT, protocol="TCP")],
                    ),
                ],
                # DNS; the identity endpoint of the cloud (Pod Identity agent, GKE metadata server); and
                # HTTPS to the cloud's public APIs (token exchange, the models bucket). Nothing else.
                egress=[dns_egress(), *identity_and_https_egress(identity_egress)],
            ),
            opts=opts,
        )

    def _hpa(
        self, name: str, ns: str, args: ServingArgs, opts: pulumi.ResourceOptions, labels: Mapping[str, str]
    ) -> None:
        self.hpa = k8s.autoscaling.v2.HorizontalPodAutoscaler(
            f"{name}-hpa",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=APP, namespace=ns, labels=dict(labels)),
            spec=k8s.autoscaling.v2.HorizontalPodAutoscalerSpecArgs(
                scale_target_ref=k8s.autoscaling.v2.CrossVersionObjectReferenceArgs(
                    api_version="apps/v1", kind="Deployment", name=APP
                ),
                min_replicas=args.min_replicas,
                max_replicas=args.max_replicas,
                metrics=[
                    k8s.autoscaling.v2.MetricSpecArgs(
                        type="Pods",
                        pods=k8s.autoscaling.v2.PodsMetricSourceArgs(
                            metric=k8s.autoscaling.v2.MetricIdentifierArgs(name=autoscaling.HPA_METRIC),
                            target=k8s.autoscaling.v2.MetricTargetArgs(
                                type="AverageValue", average_value=str(args.queue_time_target_us)
                            ),
                        ),
                    )
                ],
                # Scale up at once on queueing; scale down slowly (model load makes new pods expensive).
                behavior=k8s.autoscaling.v2.HorizontalPodAutoscalerBehaviorArgs(
                    scale_up=k8s.autoscaling.v2.HPAScalingRulesArgs(stabilization_window_seconds=0),
                    scale_down=k8s.autoscaling.v2.HPAScalingRulesArgs(stabilization_window_seconds=300),
                ),
            ),
            opts=opts,
        )

    def _scaled_object(self, name: str, ns: str, args: ServingArgs, opts: pulumi.ResourceOptions) -> None:
        self.scaled_object = k8s.apiextensions.CustomResource(
            f"{name}-scaledobject",
            api_version="keda.sh/v1alpha1",
            kind="ScaledObject",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=APP, namespace=ns),
            spec={
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": APP},
                "minReplicaCount": 0,
                "maxReplicaCount": args.max_replicas,
                "cooldownPeriod": 1800,
                "triggers": [
                    {
                        "type": "prometheus",
                        "metricType": "Value",
                        "metadata": {
                            "serverAddress": PROMETHEUS_URL,
                            "query": autoscaling.keda_query(ns, APP),
                            "threshold": str(args.queue_time_target_us),
                        },
                    },
                    # With zero pods there is no queue to measure: working hours wake the deployment.
                    {"type": "cron", "metadata": {**WORKING_HOURS, "desiredReplicas": "1"}},
                ],
            },
            opts=opts,
        )
