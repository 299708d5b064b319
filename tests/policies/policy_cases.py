"""Mutants for the exposure classes of issue 12 (network, IAM, key references), per cloud, and later issues.

Each case: (id, compliant fixture, mutation, exact expected (rule, resource name) set). An expected
name ending in "?" means the finding is "undetermined" (the rule could not decide at preview).
test_policy_rules.py runs them with its own CASES. The cases live one module per section
(policy_cases_network, _iam, _cluster_admin, _flows, _federation, _helm); this module joins them in that order.
"""

from __future__ import annotations

import policy_cases_cluster_admin
import policy_cases_federation
import policy_cases_flows
import policy_cases_helm
import policy_cases_iam
import policy_cases_network
from policy_mutators import Case

CASES: list[Case] = [
    *policy_cases_network.CASES,
    *policy_cases_iam.CASES,
    *policy_cases_cluster_admin.CASES,
    *policy_cases_flows.CASES,
    *policy_cases_federation.CASES,
    *policy_cases_helm.CASES,
]
