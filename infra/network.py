"""Address planning shared by the three clouds (pure): the node subnets, and the ranges the clusters use
outside the VPC/VNet (pods, services, control plane), which the network must not overlap."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

# GKE (VPC-native, alias IPs): pod and service secondary ranges and the private control plane's /28.
GKE_POD_RANGE, GKE_SERVICE_RANGE, GKE_CONTROL_PLANE_RANGE = "10.128.0.0/14", "10.132.0.0/20", "172.16.0.0/28"
# AKS (Azure CNI overlay): pods get addresses from an overlay range, services from a cluster-internal one.
AKS_POD_CIDR, AKS_SERVICE_CIDR, AKS_DNS_SERVICE_IP = "192.168.0.0/16", "172.17.0.0/16", "172.17.0.10"
# Ranges a cloud's cluster uses beside the configured network: an overlap breaks routing to pods or services.
CLUSTER_RANGES: Mapping[str, Mapping[str, str]] = {
    "aws": {},  # the VPC CNI gives pods addresses from the node subnets themselves
    "gcp": {
        "GKE pod range": GKE_POD_RANGE,
        "GKE service range": GKE_SERVICE_RANGE,
        "GKE control-plane range": GKE_CONTROL_PLANE_RANGE,
    },
    "azure": {"AKS pod CIDR": AKS_POD_CIDR, "AKS service CIDR": AKS_SERVICE_CIDR},
}


def overlapping_cluster_range(cloud: str, cidr: str) -> tuple[str, str] | None:
    """The first (name, range) of the cloud's cluster ranges that `cidr` overlaps, or None."""
    network = ipaddress.ip_network(cidr)
    for name, block in CLUSTER_RANGES[cloud].items():
        if network.overlaps(ipaddress.ip_network(block)):
            return name, block
    return None


def subnet_cidrs(cidr: str, zones: int) -> tuple[list[str], list[str]]:
    """Split a VPC/VNet range into /20 private node subnets (AWS's VPC CNI gives pods VPC addresses, so
    they are large) and /24 public subnets carved from the last /20 (only NAT gateways live there)."""
    network = ipaddress.ip_network(cidr)
    blocks = []
    if network.prefixlen <= 20:
        blocks = [str(s) for s in network.subnets(new_prefix=20)]
    if len(blocks) < zones + 1:
        raise ValueError(f"network.cidr {cidr} is too small for {zones} zones: use a /16 to /19")
    private = blocks[:zones]
    public = [str(s) for s in list(ipaddress.ip_network(blocks[-1]).subnets(new_prefix=24))[:zones]]
    return private, public
