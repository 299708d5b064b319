"""Issue-12 mutants for network exposure: open ingress (security groups, firewalls, NSGs) per cloud,
public Kubernetes services and ingresses, and node pools with public IPs.

policy_cases.py gathers them with the other sections for test_policy_rules.py.
"""

from __future__ import annotations

from typing import Any

import policy_fixtures as fx
from policy_mutators import Case, add, edit

SG = "aws:ec2/securityGroup:SecurityGroup"
OPEN_SSH = {"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrBlocks": ["0.0.0.0/0"]}
PRIVATE_SSH = {**OPEN_SSH, "cidrBlocks": ["10.0.0.0/8"]}
NSG_RULE = {"direction": "Inbound", "access": "Allow", "protocol": "Tcp", "destinationPortRange": "443"}
SVC = "kubernetes:core/v1:Service"


def svc(kind: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "triton-lb", "namespace": "serving"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"type": kind, "ports": [{"port": 8000.0}]},
    }


def _no_private_nodes(i: dict[str, Any]) -> None:
    i["privateClusterConfig"]["enablePrivateNodes"] = False


def _aks_public_pool(i: dict[str, Any]) -> None:
    i["agentPoolProfiles"] = [{"name": "system", "mode": "System", "enableNodePublicIP": True}]


CASES: list[Case] = [
    # network exposure: AWS
    (
        "aws-sg-open-ssh",
        fx.aws_stack,
        add(SG, "nodes-sg", {"ingress": [OPEN_SSH]}),
        {("network-no-open-ingress", "nodes-sg")},
    ),
    ("aws-sg-private-ok", fx.aws_stack, add(SG, "nodes-sg", {"ingress": [PRIVATE_SSH]}), set()),
    (
        "aws-sg-unknown-cidr",
        fx.aws_stack,
        add(SG, "nodes-sg", {"ingress": [{**OPEN_SSH, "cidrBlocks": [fx.UNKNOWN]}]}),
        {("network-no-open-ingress", "nodes-sg?")},
    ),
    (
        "aws-sg-rule-ipv6",
        fx.aws_stack,
        add(
            "aws:ec2/securityGroupRule:SecurityGroupRule",
            "https-in",
            {
                "type": "ingress",
                "fromPort": 443.0,
                "toPort": 443.0,
                "protocol": "tcp",
                "ipv6CidrBlocks": ["::/0"],
            },
        ),
        {("network-no-open-ingress", "https-in")},
    ),
    (
        "aws-sg-egress-ok",
        fx.aws_stack,
        add(
            "aws:ec2/securityGroupRule:SecurityGroupRule",
            "all-out",
            {"type": "egress", "fromPort": 0.0, "toPort": 0.0, "protocol": "-1", "cidrBlocks": ["0.0.0.0/0"]},
        ),
        set(),
    ),
    (
        "aws-vpc-ingress-rule",
        fx.aws_stack,
        add(
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "api-in",
            {"cidrIpv4": "0.0.0.0/0", "fromPort": 443.0, "toPort": 443.0, "ipProtocol": "tcp"},
        ),
        {("network-no-open-ingress", "api-in")},
    ),
    # network exposure: GCP
    (
        "gcp-firewall-open",
        fx.gcp_stack,
        add(
            "gcp:compute/firewall:Firewall",
            "allow-ssh",
            {
                "network": fx.UNKNOWN,
                "allows": [{"protocol": "tcp", "ports": ["22"]}],
                "sourceRanges": ["0.0.0.0/0"],
            },
        ),
        {("network-no-open-ingress", "allow-ssh")},
    ),
    (
        "gcp-firewall-iap-ok",
        fx.gcp_stack,
        add(
            "gcp:compute/firewall:Firewall",
            "allow-ssh",
            {
                "network": fx.UNKNOWN,
                "allows": [{"protocol": "tcp", "ports": ["22"]}],
                "sourceRanges": ["35.235.240.0/20"],
            },
        ),
        set(),
    ),
    (
        "gcp-firewall-deny-ok",
        fx.gcp_stack,
        add(
            "gcp:compute/firewall:Firewall",
            "deny-all",
            {"network": fx.UNKNOWN, "denies": [{"protocol": "all"}], "sourceRanges": ["0.0.0.0/0"]},
        ),
        set(),
    ),
    # network exposure: Azure
    (
        "azure-nsg-internet",
        fx.azure_stack,
        add(
            "azure-native:network:NetworkSecurityGroup",
            "nodes-nsg",
            {
                "location": "spaincentral",
                "securityRules": [{"name": "https", **NSG_RULE, "sourceAddressPrefix": "Internet"}],
            },
        ),
        {("network-no-open-ingress", "nodes-nsg")},
    ),
    (
        "azure-security-rule-star",
        fx.azure_stack,
        add(
            "azure-native:network:SecurityRule",
            "https",
            {**NSG_RULE, "sourceAddressPrefixes": ["10.0.0.0/8", "*"]},
        ),
        {("network-no-open-ingress", "https")},
    ),
    (
        "azure-security-rule-vnet-ok",
        fx.azure_stack,
        add(
            "azure-native:network:SecurityRule",
            "https",
            {**NSG_RULE, "sourceAddressPrefix": "VirtualNetwork"},
        ),
        set(),
    ),
    # Kubernetes exposure (same rule on every cloud's cluster)
    (
        "k8s-lb-public",
        fx.aws_stack,
        add(SVC, "triton-lb", svc("LoadBalancer")),
        {("k8s-no-public-service", "triton-lb")},
    ),
    (
        "k8s-nodeport",
        fx.gcp_stack,
        add(SVC, "triton-lb", svc("NodePort")),
        {("k8s-no-public-service", "triton-lb")},
    ),
    (
        "k8s-lb-internal-ok",
        fx.aws_stack,
        add(
            SVC,
            "triton-lb",
            svc("LoadBalancer", {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"}),
        ),
        set(),
    ),
    (
        "k8s-lb-internal-azure-ok",
        fx.azure_stack,
        add(
            SVC,
            "triton-lb",
            svc("LoadBalancer", {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}),
        ),
        set(),
    ),
    (
        "k8s-ingress-public",
        fx.aws_stack,
        add(
            "kubernetes:networking.k8s.io/v1:Ingress",
            "triton-ing",
            {"metadata": {"name": "triton"}, "spec": {"rules": []}},
        ),
        {("k8s-no-public-service", "triton-ing")},
    ),
    ("k8s-clusterip-ok", fx.aws_stack, add(SVC, "triton-lb", svc("ClusterIP")), set()),
    # public node IPs
    (
        "aws-lt-public-ip",
        fx.aws_stack,
        add(
            "aws:ec2/launchTemplate:LaunchTemplate",
            "bastion-lt",
            {"networkInterfaces": [{"associatePublicIpAddress": "true"}]},
        ),
        {("node-no-public-ip", "bastion-lt")},
    ),
    (
        "gcp-public-nodes",
        fx.gcp_stack,
        edit("gcp:container/cluster:Cluster", "cluster", _no_private_nodes),
        {("node-no-public-ip", "cluster")},
    ),
    (
        "azure-inline-pool-public-ip",
        fx.azure_stack,
        edit("azure-native:containerservice:ManagedCluster", "cluster", _aks_public_pool),
        {("node-no-public-ip", "cluster")},
    ),
]
