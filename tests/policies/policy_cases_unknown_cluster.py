"""The cluster and S3 ACL cases of policy_cases_unknown.py (same tuple shape), split for length."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import policy_fixtures as fx
from policy_mutators import EKS, GKE, Plan, _set, add, edit

AKS = "azure-native:containerservice:ManagedCluster"
ADDON = "aws:eks/addon:Addon"
DIAG = "azure-native:monitor:DiagnosticSetting"
DEP = "kubernetes:apps/v1:Deployment"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
BUCKET_ACL = "aws:s3/bucketAcl:BucketAcl"

OWNER_GRANT = {"grantee": {"type": "CanonicalUser", "id": "owner"}, "permission": "FULL_CONTROL"}


def _bucket_acl(**inputs: Any) -> Callable[[Plan], None]:
    return add(BUCKET_ACL, "data-acl", {"bucket": "eu-ml-dev-data", **inputs})


def _grants(grants: Any) -> Callable[[Plan], None]:
    return _bucket_acl(accessControlPolicy={"owner": {"id": "owner"}, "grants": grants})


def _private_only(profile: str, flag: str, value: Any) -> Callable[[Plan], None]:
    """No allow-list, so the private endpoint flag alone decides the endpoint rule."""

    def change(inputs: dict[str, Any]) -> None:
        inputs.pop("masterAuthorizedNetworksConfig", None)
        inputs[profile] = {flag: value}

    return change


CLUSTER_CASES: list[
    tuple[str, Callable[[], Plan], str, str, Callable[[Any], Callable[[Plan], None]], Any]
] = [
    (
        "eks-vpc-cni-configuration-values",
        fx.aws_stack,
        "cluster-network-policy",
        "cluster",
        lambda v: _set(ADDON, "vpc-cni", "configurationValues", v),
        json.dumps({"enableNetworkPolicy": "true"}),
    ),
    (
        "eks-public-access-cidrs-element",
        fx.aws_stack,
        "cluster-endpoint-restricted",
        "cluster",
        lambda v: _set(EKS, "cluster", "vpcConfig.publicAccessCidrs", ["203.0.113.0/24", v]),
        "198.51.100.0/24",
    ),
    (
        "eks-log-types",
        fx.aws_stack,
        "cluster-audit-logs",
        "cluster",
        lambda v: _set(EKS, "cluster", "enabledClusterLogTypes", v),
        ["api", "audit", "authenticator"],
    ),
    (
        "eks-log-types-element",
        fx.aws_stack,
        "cluster-audit-logs",
        "cluster",
        lambda v: _set(EKS, "cluster", "enabledClusterLogTypes", ["api", "audit", v]),
        "authenticator",
    ),
    (
        "gke-authorized-cidr-blocks",
        fx.gcp_stack,
        "cluster-endpoint-restricted",
        "cluster",
        lambda v: _set(GKE, "cluster", "masterAuthorizedNetworksConfig.cidrBlocks", v),
        [{"cidrBlock": "203.0.113.0/24"}],
    ),
    (
        "gke-authorized-cidr-blocks-element",
        fx.gcp_stack,
        "cluster-endpoint-restricted",
        "cluster",
        lambda v: _set(GKE, "cluster", "masterAuthorizedNetworksConfig.cidrBlocks", [v]),
        {"cidrBlock": "203.0.113.0/24"},
    ),
    (
        "gke-authorized-cidr-block",
        fx.gcp_stack,
        "cluster-endpoint-restricted",
        "cluster",
        lambda v: _set(GKE, "cluster", "masterAuthorizedNetworksConfig.cidrBlocks", [{"cidrBlock": v}]),
        "203.0.113.0/24",
    ),
    (
        "gke-private-endpoint",
        fx.gcp_stack,
        "cluster-endpoint-restricted",
        "cluster",
        lambda v: edit(GKE, "cluster", _private_only("privateClusterConfig", "enablePrivateEndpoint", v)),
        True,
    ),
    (
        "aks-private-cluster",
        fx.azure_stack,
        "cluster-endpoint-restricted",
        "cluster",
        lambda v: edit(AKS, "cluster", _private_only("apiServerAccessProfile", "enablePrivateCluster", v)),
        True,
    ),
    (
        "gke-logging-components",
        fx.gcp_stack,
        "cluster-audit-logs",
        "cluster",
        lambda v: _set(GKE, "cluster", "loggingConfig.enableComponents", v),
        ["SYSTEM_COMPONENTS", "APISERVER"],
    ),
    (
        "gke-logging-components-element",
        fx.gcp_stack,
        "cluster-audit-logs",
        "cluster",
        lambda v: _set(GKE, "cluster", "loggingConfig.enableComponents", ["SYSTEM_COMPONENTS", v]),
        "APISERVER",
    ),
    (
        "gke-logging-service",
        fx.gcp_stack,
        "cluster-audit-logs",
        "cluster",
        lambda v: _set(GKE, "cluster", "loggingService", v),
        "logging.googleapis.com/kubernetes",
    ),
    (
        "aks-audit-logs",
        fx.azure_stack,
        "cluster-audit-logs",
        "cluster",
        lambda v: _set(DIAG, "cluster-audit", "logs", v),
        [{"category": "kube-audit-admin", "enabled": True}],
    ),
    (
        "aks-audit-log-enabled",
        fx.azure_stack,
        "cluster-audit-logs",
        "cluster",
        lambda v: _set(DIAG, "cluster-audit", "logs", [{"category": "kube-audit-admin", "enabled": v}]),
        True,
    ),
    (
        "aks-audit-log-category",
        fx.azure_stack,
        "cluster-audit-logs",
        "cluster",
        lambda v: _set(DIAG, "cluster-audit", "logs", [{"category": v, "enabled": True}]),
        "kube-audit",
    ),
    (
        "gke-datapath-provider",
        fx.gcp_stack,
        "cluster-network-policy",
        "cluster",
        lambda v: _set(GKE, "cluster", "datapathProvider", v),
        "ADVANCED_DATAPATH",
    ),
    (
        "aks-network-policy",
        fx.azure_stack,
        "cluster-network-policy",
        "cluster",
        lambda v: _set(AKS, "cluster", "networkProfile.networkPolicy", v),
        "cilium",
    ),
    (
        "deployment-namespace",
        fx.aws_stack,
        "cluster-network-policy",
        "sentiment",
        lambda v: _set(DEP, "sentiment", "metadata.namespace", v),
        "serving",
    ),
    (
        "network-policy-namespace",
        fx.aws_stack,
        "cluster-network-policy",
        "sentiment",
        lambda v: _set(NETPOL, "serving-default-deny", "metadata.namespace", v),
        "serving",
    ),
    (
        "s3-canned-acl",
        fx.aws_stack,
        "s3-no-public-acl-or-policy",
        "data-acl",
        lambda v: _bucket_acl(acl=v),
        "private",
    ),
    (
        "s3-acl-grants",
        fx.aws_stack,
        "s3-no-public-acl-or-policy",
        "data-acl",
        _grants,
        [OWNER_GRANT],
    ),
    (
        "s3-acl-grants-element",
        fx.aws_stack,
        "s3-no-public-acl-or-policy",
        "data-acl",
        lambda v: _grants([OWNER_GRANT, v]),
        {
            "grantee": {"type": "Group", "uri": "http://acs.amazonaws.com/groups/s3/LogDelivery"},
            "permission": "WRITE",
        },
    ),
    (
        "s3-acl-grantee-uri",
        fx.aws_stack,
        "s3-no-public-acl-or-policy",
        "data-acl",
        lambda v: _grants([OWNER_GRANT, {"grantee": {"type": "Group", "uri": v}, "permission": "READ"}]),
        "http://acs.amazonaws.com/groups/s3/LogDelivery",
    ),
]
