"""The cases of test_rules_unknown_values.py: (id, fixture, rule, resource name, mutation given the value,
a known compliant value). Each sets one property to the engine's unknown sentinel in the test."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import policy_fixtures as fx
from policy_cases_unknown_cluster import AKS, CLUSTER_CASES
from policy_mutators import KMS, Plan, _set, add

SG = "aws:ec2/securityGroup:SecurityGroup"
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
EC2 = "aws:ec2/instance:Instance"
FIREWALL = "gcp:compute/firewall:Firewall"
GCP_IAM = "gcp:projects/iAMBinding:IAMBinding"
GCP_KEY = "gcp:kms/cryptoKey:CryptoKey"
GNP = "gcp:container/nodePool:NodePool"
NSG = "azure-native:network:NetworkSecurityGroup"
NSG_RULE = "azure-native:network:SecurityRule"
AKS_POOL = "azure-native:containerservice:AgentPool"
AZ_KEY = "azure-native:keyvault:Key"
CONTAINER = "azure-native:storage:BlobContainer"
HELM = "kubernetes:helm.sh/v3:Release"
PRIVATE_SSH = {"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrBlocks": ["10.0.0.0/8"]}
INBOUND = {"direction": "Inbound", "access": "Allow", "protocol": "Tcp", "destinationPortRange": "22"}


def _lifetime_actions(after: Any) -> list[dict[str, Any]]:
    return [{"action": {"type": "rotate"}, "trigger": {"timeAfterCreate": after}}]


# (id, fixture, rule, resource name, mutation given the value, a known compliant value)
Build = Callable[[Any], Callable[[Plan], None]]
CASES: list[tuple[str, Callable[[], Plan], str, str, Build, Any]] = [
    (
        "s3-bucket-policy",
        fx.aws_stack,
        "s3-no-public-acl-or-policy",
        "data-policy",
        lambda v: _set("aws:s3/bucketPolicy:BucketPolicy", "data-policy", "policy", v),
        fx.tls_policy("eu-ml-dev-data"),
    ),
    (
        "gcp-members-element",
        fx.gcp_stack,
        "gcp-no-public-iam-members",
        "readers",
        lambda v: add(
            GCP_IAM,
            "readers",
            {"project": "p", "role": "roles/storage.objectViewer", "members": ["serviceAccount:a@b", v]},
        ),
        "group:ml@example.com",
    ),
    (
        "sg-ingress-list",
        fx.aws_stack,
        "network-no-open-ingress",
        "nodes-sg",
        lambda v: add(SG, "nodes-sg", {"ingress": v}),
        [PRIVATE_SSH],
    ),
    (
        "sg-ingress-cidr-blocks",
        fx.aws_stack,
        "network-no-open-ingress",
        "nodes-sg",
        lambda v: add(SG, "nodes-sg", {"ingress": [{**PRIVATE_SSH, "cidrBlocks": v}]}),
        ["10.0.0.0/8"],
    ),
    (
        "sg-ingress-ipv6-cidr-blocks",
        fx.aws_stack,
        "network-no-open-ingress",
        "nodes-sg",
        lambda v: add(SG, "nodes-sg", {"ingress": [{**PRIVATE_SSH, "ipv6CidrBlocks": v}]}),
        ["fd00::/8"],
    ),
    (
        "sg-rule-cidr-blocks",
        fx.aws_stack,
        "network-no-open-ingress",
        "ssh-rule",
        lambda v: add(
            SG_RULE,
            "ssh-rule",
            {**PRIVATE_SSH, "type": "ingress", "securityGroupId": "sg-1", "cidrBlocks": v},
        ),
        ["10.0.0.0/8"],
    ),
    (
        "gcp-firewall-source-ranges",
        fx.gcp_stack,
        "network-no-open-ingress",
        "allow-ssh",
        lambda v: add(
            FIREWALL, "allow-ssh", {"network": "vpc", "allows": [{"protocol": "tcp"}], "sourceRanges": v}
        ),
        ["10.0.0.0/8"],
    ),
    (
        "gcp-firewall-allows",
        fx.gcp_stack,
        "network-no-open-ingress",
        "allow-ssh",
        lambda v: add(FIREWALL, "allow-ssh", {"network": "vpc", "allows": v, "sourceRanges": ["0.0.0.0/0"]}),
        [],
    ),
    (
        "gcp-firewall-direction",
        fx.gcp_stack,
        "network-no-open-ingress",
        "allow-ssh",
        lambda v: add(
            FIREWALL,
            "allow-ssh",
            {
                "network": "vpc",
                "direction": v,
                "allows": [{"protocol": "tcp"}],
                "sourceRanges": ["0.0.0.0/0"],
            },
        ),
        "EGRESS",
    ),
    (
        "nsg-security-rules",
        fx.azure_stack,
        "network-no-open-ingress",
        "nodes-nsg",
        lambda v: add(NSG, "nodes-nsg", {"securityRules": v}),
        [{**INBOUND, "sourceAddressPrefix": "10.0.0.0/8"}],
    ),
    (
        "nsg-rule-source-prefixes",
        fx.azure_stack,
        "network-no-open-ingress",
        "ssh-rule",
        lambda v: add(NSG_RULE, "ssh-rule", {**INBOUND, "sourceAddressPrefixes": v}),
        ["10.0.0.0/8"],
    ),
    (
        "helm-version",
        fx.gcp_stack,
        "helm-chart-pinned",
        "grafana",
        lambda v: add(
            HELM,
            "grafana",
            {
                "chart": "grafana",
                "version": v,
                "repositoryOpts": {"repo": "https://grafana.github.io/helm-charts"},
            },
        ),
        "8.5.1",
    ),
    (
        "helm-repository",
        fx.gcp_stack,
        "helm-chart-pinned",
        "grafana",
        lambda v: add(
            HELM, "grafana", {"chart": "grafana", "version": "8.5.1", "repositoryOpts": {"repo": v}}
        ),
        "https://grafana.github.io/helm-charts",
    ),
    (
        "kms-deletion-window",
        fx.aws_stack,
        "kms-key-deletion-protection",
        "data-key",
        lambda v: _set(KMS, "data-key", "deletionWindowInDays", v),
        30.0,
    ),
    (
        "gcp-key-destroy-scheduled-duration",
        fx.gcp_stack,
        "kms-key-deletion-protection",
        "data-key",
        lambda v: _set(GCP_KEY, "data-key", "destroyScheduledDuration", v),
        "2592000s",
    ),
    (
        "azure-key-rotation-trigger",
        fx.azure_stack,
        "kms-key-rotation",
        "data",
        lambda v: _set(AZ_KEY, "data", "properties.rotationPolicy.lifetimeActions", _lifetime_actions(v)),
        "P90D",
    ),
    (
        "azure-key-rotation-actions",
        fx.azure_stack,
        "kms-key-rotation",
        "data",
        lambda v: _set(AZ_KEY, "data", "properties.rotationPolicy.lifetimeActions", v),
        _lifetime_actions("P90D"),
    ),
    (
        "launch-template-public-ip",
        fx.aws_stack,
        "node-no-public-ip",
        "gpu-lt",
        lambda v: _set(LT, "gpu-lt", "networkInterfaces", [{"associatePublicIpAddress": v}]),
        "false",
    ),
    (
        "launch-template-network-interfaces",
        fx.aws_stack,
        "node-no-public-ip",
        "gpu-lt",
        lambda v: _set(LT, "gpu-lt", "networkInterfaces", v),
        [{"associatePublicIpAddress": "false"}],
    ),
    (
        "instance-public-ip",
        fx.aws_stack,
        "node-no-public-ip",
        "bastion",
        lambda v: add(EC2, "bastion", {"instanceType": "t3.micro", "associatePublicIpAddress": v}),
        False,
    ),
    (
        "gke-node-pool-private-nodes",
        fx.gcp_stack,
        "node-no-public-ip",
        "gpu-spot",
        lambda v: _set(GNP, "gpu-spot", "networkConfig", {"enablePrivateNodes": v}),
        True,
    ),
    (
        "aks-profile-public-ip",
        fx.azure_stack,
        "node-no-public-ip",
        "cluster",
        lambda v: _set(AKS, "cluster", "agentPoolProfiles", [{"name": "system", "enableNodePublicIP": v}]),
        False,
    ),
    (
        "aks-agent-pool-public-ip",
        fx.azure_stack,
        "node-no-public-ip",
        "gpu",
        lambda v: add(AKS_POOL, "gpu", {"resourceName": fx.UNKNOWN, "enableNodePublicIP": v}),
        False,
    ),
    (
        "azure-container-public-access",
        fx.azure_stack,
        "azure-storage-no-public-blob",
        "checkpoints",
        lambda v: _set(CONTAINER, "checkpoints", "publicAccess", v),
        "None",
    ),
    *CLUSTER_CASES,
]
