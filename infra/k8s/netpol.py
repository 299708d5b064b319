"""NetworkPolicies shared by the platform's workloads (Triton, the drift and budget jobs, Alertmanager)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# Cloud APIs (S3/STS, Google APIs, Entra ID and Blob storage) are public HTTPS endpoints; private and
# link-local ranges stay closed, so this opens no path to other pods, nodes or the VPC.
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10")


def default_deny(
    resource_name: str, namespace: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> k8s.networking.v1.NetworkPolicy:
    """Nothing in or out of `namespace` but what a workload's own policy opens."""
    return k8s.networking.v1.NetworkPolicy(
        f"{resource_name}-default-deny",
        metadata=k8s.meta.v1.ObjectMetaArgs(name="default-deny", namespace=namespace),
        spec=k8s.networking.v1.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(), policy_types=["Ingress", "Egress"]
        ),
        opts=opts,
    )


def dns_egress() -> k8s.networking.v1.NetworkPolicyEgressRuleArgs:
    """The cluster DNS (kube-dns/CoreDNS pods in kube-system), UDP and TCP 53."""
    return k8s.networking.v1.NetworkPolicyEgressRuleArgs(
        to=[
            k8s.networking.v1.NetworkPolicyPeerArgs(
                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                    match_labels={"kubernetes.io/metadata.name": "kube-system"}
                ),
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"k8s-app": "kube-dns"}),
            )
        ],
        ports=[
            k8s.networking.v1.NetworkPolicyPortArgs(port=53, protocol="UDP"),
            k8s.networking.v1.NetworkPolicyPortArgs(port=53, protocol="TCP"),
        ],
    )


def identity_and_https_egress(
    identity_egress: Sequence[Mapping[str, Any]], ports: Sequence[int] = (443,)
) -> list[k8s.networking.v1.NetworkPolicyEgressRuleArgs]:
    """The pod identity endpoint of the cloud (CloudPlatform.identity_egress: Pod Identity agent, GKE
    metadata server), then public addresses on `ports` (HTTPS by default), private ranges excepted."""
    return [
        *[
            k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                to=[
                    k8s.networking.v1.NetworkPolicyPeerArgs(
                        ip_block=k8s.networking.v1.IPBlockArgs(cidr=rule["cidr"])
                    )
                ],
                ports=[
                    k8s.networking.v1.NetworkPolicyPortArgs(port=port, protocol=protocol)
                    for protocol, port in rule["ports"]
                ],
            )
            for rule in identity_egress
        ],
        k8s.networking.v1.NetworkPolicyEgressRuleArgs(
            to=[
                k8s.networking.v1.NetworkPolicyPeerArgs(
                    ip_block=k8s.networking.v1.IPBlockArgs(cidr="0.0.0.0/0", except_=list(PRIVATE_RANGES))
                )
            ],
            ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=p, protocol="TCP") for p in ports],
        ),
    ]
