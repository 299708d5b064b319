"""What the report says was NOT checked (policies/unchecked.yaml) must be true of the plans it is printed for. The
reason for EKS access policy associations read "no admin policy is associated" while every AWS stack associated
AmazonEKSClusterAdminPolicy, cluster-wide, with two roles: the report vouched for a grant no rule had looked at."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from policies.evidence import covered, load_unchecked, unchecked_reason

pytestmark = pytest.mark.integration

# Administrator grants as a value in a resource's inputs: AWS managed admin policies, EKS's cluster-admin access
# policies, Kubernetes' cluster-admin role, GCP's basic roles.
ADMIN_GRANT = re.compile(
    r"arn:aws[-a-z]*:iam::aws:policy/(AdministratorAccess|PowerUserAccess|IAMFullAccess)"
    r"|arn:aws[-a-z]*:eks::aws:cluster-access-policy/AmazonEKS(Cluster)?AdminPolicy"
    r"|cluster-admin|roles/owner|roles/editor"
)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_an_unchecked_type_never_hides_an_administrator_grant(real_plans: dict[str, dict[str, Any]]) -> None:
    """A type no rule reads may carry an admin grant only if its reason names that grant, so the reviewer sees it."""
    unchecked = load_unchecked()
    hidden = set()
    for stack, plan in real_plans.items():
        for r in plan["resources"]:
            reason = unchecked_reason(r["type"], unchecked)
            if reason is None or covered(r["type"]):
                continue
            for text in _strings(r.get("inputs") or {}):
                for match in ADMIN_GRANT.finditer(text):
                    grant = match.group(0).rsplit("/", 1)[-1]
                    if grant not in reason:
                        hidden.add((r["type"], grant, stack))
    assert not hidden, f"policies/unchecked.yaml's reason does not name these grants: {sorted(hidden)}"
