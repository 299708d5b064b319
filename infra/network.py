"""Address planning shared by the three clouds (pure)."""

from __future__ import annotations

import ipaddress


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
