"""The building blocks of the mutant cases: the Case shape, generic mutations and resource type tokens.

Both the rule mutants (policy_mutants_*) and the issue-12 cases (policy_cases_*) build their
mutations from these, so a mutation means the same thing in every case module. A case is
(id, compliant fixture, mutation, exact expected (rule, resource name) set); a name ending in "?" is
an undetermined finding.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import policy_fixtures as fx

Plan = dict[str, Any]
Case = tuple[str, Callable[[], Plan], Callable[[Plan], None], set[tuple[str, str | None]]]


def _inputs(plan: Plan, type_: str, name: str) -> dict[str, Any]:
    return fx.find(plan, type_, name)["inputs"]


def _drop(plan: Plan, type_: str, name: str) -> None:
    plan["resources"].remove(fx.find(plan, type_, name))


def _set(type_: str, name: str, path: str, value: Any) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        cur = _inputs(plan, type_, name)
        keys = path.split(".")
        for k in keys[:-1]:
            cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
        if value is _DELETE:
            del cur[keys[-1]]
        else:
            cur[keys[-1]] = value

    return mutate


_DELETE = object()
S3 = "aws:s3/bucket:Bucket"
KMS = "aws:kms/key:Key"
EKS = "aws:eks/cluster:Cluster"
NG = "aws:eks/nodeGroup:NodeGroup"
DEP = "kubernetes:apps/v1:Deployment"
GCS = "gcp:storage/bucket:Bucket"
GKE = "gcp:container/cluster:Cluster"
GNP = "gcp:container/nodePool:NodePool"
SA = "azure-native:storage:StorageAccount"
AKS = "azure-native:containerservice:ManagedCluster"
POOL = "azure-native:containerservice:AgentPool"
BUCKETS = ("data", "checkpoints", "models", "access-logs")


def _add(plan: Plan, type_: str, name: str, inputs: dict[str, Any]) -> None:
    plan["resources"].append(fx.res(plan["stack"], type_, name, inputs))


def add(type_: str, name: str, inputs: dict[str, Any], **extra: Any) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        # Like the fixture's own resources: the cloud's explicit provider (default tags, region).
        pkg = type_.split(":", 1)[0]
        prov = next((r for r in plan["resources"] if r["type"] == f"pulumi:providers:{pkg}"), None)
        if prov is not None:
            extra.setdefault("provider", prov["urn"] + "::" + fx.UNKNOWN)
        plan["resources"].append(fx.res(plan["stack"], type_, name, inputs, **extra))

    return mutate


def edit(type_: str, name: str, change: Callable[[dict[str, Any]], None]) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        change(fx.find(plan, type_, name)["inputs"])

    return mutate


def doc(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})
