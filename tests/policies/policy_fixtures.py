"""Compliant fixture stacks in the plan wire format (camelCase inputs as the mock engine receives them).

Each test mutates one resource of a compliant stack and asserts the exact violations (the
compliance-policies habit: one compliant resource, one mutant per failure mode).

The stacks live one module per cloud (policy_fixtures_aws, _gcp, _azure, with the shared serving
workload in policy_fixtures_k8s and the builders in policy_fixtures_base); this module gathers their
public names so that tests keep writing `fx.aws_stack`, `fx.UNKNOWN`, `fx.find`.
"""

from __future__ import annotations

from policy_fixtures_aws import aws_stack, tls_policy
from policy_fixtures_azure import azure_stack
from policy_fixtures_base import KEY_ARN, PROJECT, TAGS, UNKNOWN, clone, find, res, urn
from policy_fixtures_gcp import gcp_stack
from policy_fixtures_k8s import k8s_serving

__all__ = [
    "KEY_ARN",
    "PROJECT",
    "TAGS",
    "UNKNOWN",
    "aws_stack",
    "azure_stack",
    "clone",
    "find",
    "gcp_stack",
    "k8s_serving",
    "res",
    "tls_policy",
    "urn",
]
