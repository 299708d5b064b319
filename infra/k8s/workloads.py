"""Training workload support (namespace, trainer service account, GPU quota) and the CI deployer's RBAC."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_kubernetes as k8s

from infra.k8s.serving import APP, RESTRICTED
from infra.shape import SERVICE_ACCOUNTS


def _service_account(
    name: str,
    identity: str,
    annotations: Mapping[str, pulumi.Input[str]],
    labels: Mapping[str, str],
    opts: pulumi.ResourceOptions,
) -> k8s.core.v1.ServiceAccount:
    ref = SERVICE_ACCOUNTS[identity]
    return k8s.core.v1.ServiceAccount(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=ref.name, namespace=ref.namespace, labels=dict(labels), annotations=dict(annotations)
        ),
        opts=opts,
    )


class TrainingWorkload(pulumi.ComponentResource):
    """What a training Job needs from the cluster; the Job itself is rendered by `python -m training launch`."""

    def __init__(
        self,
        name: str,
        *,
        gpu_quota: int,
        annotations: Mapping[str, pulumi.Input[str]],
        labels: Mapping[str, str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:k8s:TrainingWorkload", name, None, opts)
        ns = SERVICE_ACCOUNTS["trainer"].namespace
        namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=ns, labels={**RESTRICTED, **labels}),
            opts=pulumi.ResourceOptions(parent=self),
        )
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        self.service_account = _service_account(f"{name}-sa", "trainer", annotations, labels, in_ns)
        # No more GPUs requested than the spot pool can ever hold: a typo cannot queue 64-GPU jobs forever.
        k8s.core.v1.ResourceQuota(
            f"{name}-gpu-quota",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="gpu", namespace=ns, labels=dict(labels)),
            spec=k8s.core.v1.ResourceQuotaSpecArgs(hard={"requests.nvidia.com/gpu": str(gpu_quota)}),
            opts=in_ns,
        )
        self.register_outputs({})


class CiDeployer(pulumi.ComponentResource):
    """The CI identity's service account and the one permission it has in the cluster: roll Triton's image."""

    def __init__(
        self,
        name: str,
        *,
        annotations: Mapping[str, pulumi.Input[str]],
        labels: Mapping[str, str],
        serving_namespace: pulumi.Resource,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:k8s:CiDeployer", name, None, opts)
        ref = SERVICE_ACCOUNTS["ci-deployer"]
        target_ns = SERVICE_ACCOUNTS["server"].namespace
        namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=ref.namespace, labels={**RESTRICTED, **labels}),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.service_account = _service_account(
            f"{name}-sa",
            "ci-deployer",
            annotations,
            labels,
            pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
        )
        in_target = pulumi.ResourceOptions(parent=self, depends_on=[serving_namespace])
        k8s.rbac.v1.Role(
            f"{name}-role",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="ci-deployer", namespace=target_ns, labels=dict(labels)),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=["apps"],
                    resources=["deployments"],
                    resource_names=[APP],
                    verbs=["get", "patch", "update"],
                ),
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=["apps"], resources=["deployments", "replicasets"], verbs=["list", "watch"]
                ),
            ],
            opts=in_target,
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="ci-deployer", namespace=target_ns, labels=dict(labels)),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="Role", name="ci-deployer"
            ),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=ref.name, namespace=ref.namespace)],
            opts=in_target,
        )
        self.register_outputs({})
