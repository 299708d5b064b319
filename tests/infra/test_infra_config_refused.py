"""Config validation, the bad-input table: each kind of refused config stops with a ConfigError that names the
key, the value and what is allowed (the committed stacks and the accepted inputs: test_infra_config.py)."""

from __future__ import annotations

from typing import Any

import pytest
from test_infra_config import DELETE, mutate, parse

from infra.config import ConfigError

# (description, stack, key path, new value, key named in the error, words the message must contain)
BAD_INPUTS = [
    ("non-EU AWS region", "dev", "region", "us-east-1", "region", "eu-south-2"),
    ("UK is not EU", "dev", "region", "eu-west-2", "region", "not an EU region"),
    ("Zurich is not EU", "gcp-dev", "region", "europe-west6", "region", "europe-southwest1"),
    ("non-EU Azure region", "azure-dev", "region", "eastus", "region", "spaincentral"),
    ("unknown top-level key", "dev", "regoin", "eu-south-2", "regoin", "unknown key"),
    ("unknown nested key", "dev", "cluster.gpuPool.maxNodes", 3, "cluster.gpuPool.maxNodes", "unknown key"),
    ("unknown cloud", "dev", "cloud", "oci", "cloud", "aws, gcp, azure"),
    ("unknown environment", "dev", "environment", "qa", "environment", "dev, staging, prod"),
    ("min > max", "dev", "cluster.systemPool.min", 5, "cluster.systemPool.min", "<= cluster.systemPool.max"),
    (
        "GKE pool max below its zones",
        "gcp-dev",
        "cluster.servingPool.max",
        2,
        "cluster.servingPool.max",
        "3 zones, 3 in all to reach min 1",
    ),
    # min 4 starts 2 per zone: 6 nodes over a max of 4
    (
        "GKE pool starts over its max",
        "gcp-dev",
        "cluster.systemPool",
        {"machineTypes": ["e2-standard-4"], "min": 4, "max": 4},
        "cluster.systemPool.max",
        "6 in all to reach min 4",
    ),  # fmt: skip
    ("replicas min > max", "dev", "serving.minReplicas", 9, "serving.minReplicas", "<= serving.maxReplicas"),
    (
        "GPU cap above budget",
        "dev",
        "cluster.gpuPool.max",
        20,
        "cluster.gpuPool.max",
        "exceeds budget.monthlyAmount",
    ),
    ("GPU pool not from zero", "dev", "cluster.gpuPool.min", 1, "cluster.gpuPool.min", "min: 0"),
    ("GPU pool on demand", "dev", "cluster.gpuPool.spot", False, "cluster.gpuPool.spot", "spot: true"),
    ("missing owner tag", "dev", "tags.owner", DELETE, "tags.owner", "required tags"),
    ("missing cost-centre tag", "dev", "tags.cost-centre", DELETE, "tags.cost-centre", "required tags"),
    (
        "missing data-classification",
        "dev",
        "tags.data-classification",
        DELETE,
        "tags.data-classification",
        "required",
    ),
    (
        "tag environment mismatch",
        "dev",
        "tags.environment",
        "prod",
        "tags.environment",
        "must equal environment",
    ),
    (
        "bad classification",
        "dev",
        "tags.data-classification",
        "secret",
        "tags.data-classification",
        "restricted",
    ),
    ("open API in prod", "prod", "network.apiAllowedCidrs", ["0.0.0.0/0"], "network.apiAllowedCidrs", "prod"),
    ("not a CIDR", "dev", "network.cidr", "10.0.0.0/33", "network.cidr", "CIDR"),
    ("network too small", "dev", "network.cidr", "10.0.0.0/24", "network.cidr", "/16 to /19"),
    ("tag image in prod", "prod", "serving.image", "0.1.0-abc1234", "serving.image", "digest"),
    ("scale to zero in staging", "staging", "serving.scaleToZero", True, "serving.scaleToZero", "only dev"),
    ("one replica in prod", "prod", "serving.minReplicas", 1, "serving.minReplicas", ">= 2"),
    (
        "spot serving in prod",
        "prod",
        "cluster.servingPool.spot",
        True,
        "cluster.servingPool.spot",
        "on-demand",
    ),
    ("GPU serving in prod", "prod", "serving.gpu", True, "serving.gpu", "GPU pool is spot"),
    ("rotation above 90 days", "dev", "keyRotationDays", 365, "keyRotationDays", "<= 90"),
    ("audit retention below a year", "dev", "auditRetentionDays", 90, "auditRetentionDays", ">= 365"),
    ("AWS budget in EUR", "dev", "budget.currency", "EUR", "budget.currency", "USD"),
    ("missing budget", "dev", "budget", DELETE, "budget", "required"),
    ("GCP without project", "gcp-dev", "gcpProject", DELETE, "gcpProject", "required"),
    ("bad billing account", "gcp-dev", "gcpBillingAccount", "billing", "gcpBillingAccount", "XXXXXX"),
    ("bad org", "dev", "org", "Acme Corp", "org", "lowercase"),
    ("string where number", "dev", "cluster.gpuPool.max", "many", "cluster.gpuPool.max", "integer"),
    # What the clouds refuse, with the bound's source in the message.
    ("AWS KMS rotation below 90 days", "dev", "keyRotationDays", 30, "keyRotationDays", "botocore kms model"),
    (
        "CloudWatch retention not an allowed value",
        "dev",
        "auditRetentionDays",
        500,
        "auditRetentionDays",
        "731",
    ),
    (
        "Log Analytics retention over 730",
        "azure-dev",
        "auditRetentionDays",
        1000,
        "auditRetentionDays",
        "<= 730",
    ),
    ("GCP log bucket over 3650 days", "gcp-dev", "auditRetentionDays", 4000, "auditRetentionDays", "3650"),
    (
        "six Azure budget notifications",
        "azure-dev",
        "budget.alertThresholds",
        [10, 25, 50, 80, 100],
        "budget.alertThresholds",
        "up to five",
    ),
    (
        "eleven AWS budget notifications",
        "dev",
        "budget.alertThresholds",
        list(range(10, 110, 10)),
        "budget.alertThresholds",
        "botocore budgets model",
    ),
    (
        "VPC on GKE's pod range",
        "gcp-dev",
        "network.cidr",
        "10.128.0.0/16",
        "network.cidr",
        "GKE pod range 10.128.0.0/14",
    ),
    (
        "VNet on AKS's service range",
        "azure-dev",
        "network.cidr",
        "172.17.0.0/16",
        "network.cidr",
        "AKS service CIDR",
    ),
    (
        "several GKE machine types",
        "gcp-dev",
        "cluster.gpuPool.machineTypes",
        ["g2-standard-8", "g2-standard-12"],
        "cluster.gpuPool.machineTypes",
        "one machineType",
    ),
    (
        "several AKS vm sizes",
        "azure-dev",
        "cluster.systemPool.machineTypes",
        ["Standard_D4s_v5", "Standard_D8s_v5"],
        "cluster.systemPool.machineTypes",
        "one vmSize",
    ),
    ("gcpProject on AWS", "dev", "gcpProject", "acme-ml", "gcpProject", "only gcp stacks"),
    (
        "aws section on GCP",
        "gcp-dev",
        "aws",
        {"adminRole": "a", "deployerRole": "b"},
        "aws",
        "only aws stacks",
    ),
    ("AWS without cluster admins", "dev", "aws", DELETE, "aws", "required"),
    ("role name IAM refuses", "dev", "aws.adminRole", "platform admin!", "aws.adminRole", "[\\w+=,.@-]+"),
    ("non-quantity cpu", "dev", "serving.cpu", "two", "serving.cpu", "Kubernetes quantity"),
    ("non-quantity memory", "dev", "serving.memory", "4 GB", "serving.memory", "quantity"),
    (
        "empty API allow-list on AWS",
        "dev",
        "network.apiAllowedCidrs",
        [],
        "network.apiAllowedCidrs",
        "office/VPN",
    ),
    (
        "empty API allow-list on GCP",
        "gcp-dev",
        "network.apiAllowedCidrs",
        [],
        "network.apiAllowedCidrs",
        "office/VPN",
    ),
    (
        "empty API allow-list on Azure",
        "azure-dev",
        "network.apiAllowedCidrs",
        [],
        "network.apiAllowedCidrs",
        "office/VPN",
    ),
    (
        "autoscaler unknown for the minor",
        "dev",
        "cluster.kubernetesVersion",
        "1.35",
        "cluster.kubernetesVersion",
        "infra/k8s/versions.py",
    ),
    (
        "cluster too old for the preStop sleep on GCP",
        "gcp-dev",
        "cluster.kubernetesVersion",
        "1.29",
        "cluster.kubernetesVersion",
        "1.30 or later",
    ),
    (
        "cluster too old for the preStop sleep on Azure",
        "azure-dev",
        "cluster.kubernetesVersion",
        "1.28",
        "cluster.kubernetesVersion",
        "KEP-3960",
    ),
    (
        "device-code kubelogin",
        "azure-dev",
        "azure.kubeloginMode",
        "devicecode",
        "azure.kubeloginMode",
        "azurecli",
    ),
    (
        "unquoted kubernetes version",
        "dev",
        "cluster.kubernetesVersion",
        1.33,
        "cluster.kubernetesVersion",
        "quote",
    ),
]


@pytest.mark.parametrize(
    ("stack", "path", "value", "key", "words"), [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS]
)
def test_bad_input_names_key_value_and_what_is_allowed(
    stack: str, path: str, value: Any, key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse(mutate(path, value, stack), stack)
    assert err.value.key == key
    message = str(err.value)
    assert message.startswith(f"{key}: ")
    assert words in message
    if value is not DELETE and not isinstance(value, list | dict):
        assert repr(value) in message or str(value) in message
