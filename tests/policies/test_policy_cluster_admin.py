"""k8s-cluster-admin-grants on the committed stacks (rendered by infra.plan): every cluster-admin grant made through
cloud IAM is shown with its principal and scope, advisory (the gate, `make policy` and promotion still pass), and a
reviewer can accept one explicitly with a signed waiver. Before this rule, AmazonEKSClusterAdminPolicy (AWS admin and
deployer roles, every stack) and the AKS RBAC Cluster Admin role (Azure deployer) were read by no rule at all."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import analyze
from policies.analyze import plan_from_dict, to_resources
from policies.rules import BY_NAME, Context

pytestmark = pytest.mark.integration
RULE = "k8s-cluster-admin-grants"
ACCESS_POLICY = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
# Every cluster-admin grant the committed program makes: (stack, resource name, what the message must name).
EXPECTED = {
    ("dev", "mlp-dev-eks-access-admin-admin", "role/mlp-platform-admin"),
    ("dev", "mlp-dev-eks-access-deployer-admin", "role/mlp-ci-deployer"),
    ("prod", "mlp-prod-eks-access-admin-admin", "role/mlp-platform-admin"),
    ("prod", "mlp-prod-eks-access-deployer-admin", "role/mlp-ci-deployer"),
    (
        "azure-dev",
        "mlp-azure-dev-aks-deployer-rbac-cluster-admin",
        "22222222-2222-2222-2222-222222222222 (User)",
    ),
}


def grants(plan: dict[str, Any]) -> dict[str, str]:
    """Resource name -> message of this rule's findings on a plan (in-process)."""
    p = plan_from_dict(plan)
    rule, ctx = BY_NAME[RULE], Context(environment=p.environment)
    return {r.name: m for r in to_resources(p) for m in rule.check_resource(r, ctx)}


def test_every_committed_cluster_admin_grant_is_shown_with_principal_and_scope(
    real_plans: dict[str, dict[str, Any]],
) -> None:
    found = {(stack, name, msg) for stack, plan in real_plans.items() for name, msg in grants(plan).items()}
    assert {(s, n) for s, n, _ in found} == {(s, n) for s, n, _ in EXPECTED}  # gcp-dev grants none
    for stack, name, principal in EXPECTED:
        msg = next(m for s, n, m in found if (s, n) == (stack, name))
        assert principal in msg, msg
        assert "cluster-admin" in msg and "waiver" in msg, msg
        if stack != "azure-dev":
            assert (
                f"at cluster scope for arn:aws:iam::123456789012:{principal} on EKS cluster mlp-{stack}"
                in msg
            )


def _set_input(plan: dict[str, Any], type_: str, name: str, path: str, value: Any) -> None:
    res = next(r for r in plan["resources"] if r["type"] == type_ and r["name"] == name)
    cur = res["inputs"]
    keys = path.split(".")
    for k in keys[:-1]:
        cur = cur.setdefault(k, {})
    cur[keys[-1]] = value


READER = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Authorization/roleDefinitions/"
)


@pytest.mark.parametrize(
    ("stack", "type_", "name", "path", "value"),
    [
        ("dev", ACCESS_POLICY, "mlp-dev-eks-access-deployer-admin", "accessScope", {"type": "namespace", "namespaces": ["serving"]}),
        ("dev", ACCESS_POLICY, "mlp-dev-eks-access-deployer-admin", "policyArn", "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"),
        ("prod", ACCESS_POLICY, "mlp-prod-eks-access-admin-admin", "policyArn", "arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy"),
        # "Azure Kubernetes Service RBAC Reader"
        ("azure-dev", ROLE_ASSIGNMENT, "mlp-azure-dev-aks-deployer-rbac-cluster-admin", "roleDefinitionId", READER + "7f6c6a51-bcf8-42ba-9220-52d62157d7db"),
    ],
    ids=["eks-namespace-scope", "eks-view-policy", "eks-edit-policy", "aks-rbac-reader"],
)  # fmt: skip
def test_a_narrowed_grant_is_no_longer_reported(
    real_plans: dict[str, dict[str, Any]], stack: str, type_: str, name: str, path: str, value: Any
) -> None:
    plan = copy.deepcopy(real_plans[stack])
    before = grants(plan)
    _set_input(plan, type_, name, path, value)
    after = grants(plan)
    assert name in before and after == {n: m for n, m in before.items() if n != name}


def test_through_the_pack_the_grants_are_advisory_and_a_signed_waiver_accepts_one(
    real_plans: dict[str, dict[str, Any]], pack_python: Path, tmp_path: Path
) -> None:
    """The real Analyzer session (the pack process over gRPC, as `make policy` runs it): the two dev grants are
    advisory, so they never fail the gate; a reviewer's waiver moves the deployer's to `waived`, with its approver."""
    plan_path = tmp_path / "plans" / "dev.json"
    plan_path.parent.mkdir()
    plan_path.write_text(json.dumps(real_plans["dev"]))
    today = dt.date(2026, 12, 7)
    waiver = {
        "rule": RULE,
        "finding": "violation",
        "stacks": ["dev"],
        "resources": ["mlp-dev-eks-access-deployer-admin"],
        "justification": "pulumi up installs charts with CRDs, ClusterRoles and webhooks (infra/k8s/addons.py).",
        "approver": "Test Reviewer <reviewer@example.eu>",
        "expires": str(today + dt.timedelta(days=30)),
    }
    waivers_path = tmp_path / "waivers.yaml"
    waivers_path.write_text(yaml.safe_dump({"waivers": [waiver]}, sort_keys=False))

    [doc] = analyze.run(
        [plan_path], tmp_path / "out", waivers_path=waivers_path, today=today, python=pack_python
    )

    mine = [v for v in doc["violations"] if v["policy"] == RULE]
    assert [(v["urn"].rsplit("::", 1)[-1], v["enforcement"], v["severity"]) for v in mine] == [
        ("mlp-dev-eks-access-admin-admin", "advisory", "high")
    ]
    assert not [v for v in analyze.mandatory(doc) if v["policy"] == RULE]
    [waived] = [w for w in doc["waived"] if w["policy"] == RULE]
    assert waived["urn"].endswith("::mlp-dev-eks-access-deployer-admin")
    assert waived["waiver"]["approver"] == "Test Reviewer <reviewer@example.eu>"
