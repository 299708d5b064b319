"""The rule catalogue: every rule of the pack, as pure functions (no pulumi_policy import).

`ALL_RULES` is what policies/pack.py wraps into CrossGuard policies and what the tests exercise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import enforcement
from . import (
    alerting,
    audit,
    ci_identity,
    cluster,
    cluster_admin,
    cost,
    data_flows,
    data_lifecycle,
    encryption,
    gpu,
    iam,
    key_hygiene,
    keys,
    network,
    public_access,
    registry,
    residency,
    transport,
    workload,
)
from .core import Context, Finding, Resource, Rule

ALL_RULES: tuple[Rule, ...] = (
    *residency.RULES,
    *data_flows.RULES,
    *encryption.RULES,
    *key_hygiene.RULES,
    *keys.RULES,
    *public_access.RULES,
    *transport.RULES,
    *network.RULES,
    *data_lifecycle.RULES,
    *iam.RULES,
    *cluster_admin.RULES,
    *ci_identity.RULES,
    *cluster.RULES,
    *gpu.RULES,
    *workload.RULES,
    *registry.RULES,
    *audit.RULES,
    *cost.RULES,
    *alerting.RULES,
)
BY_NAME: Mapping[str, Rule] = {r.name: r for r in ALL_RULES}
assert len(BY_NAME) == len(ALL_RULES), "rule names must be unique"


def evaluate(
    resources: Sequence[Resource], ctx: Context, rules: Sequence[Rule] = ALL_RULES
) -> list[tuple[str, Finding]]:
    """Run rules in-process: (rule name, finding) pairs. The pack does the same over gRPC."""
    out: list[tuple[str, Finding]] = []
    table = enforcement.load()
    for rule in rules:
        if table.level(rule.name, ctx.environment) == "not-applicable":
            continue  # the environment table exempts this stack's environment (as the pack does)
        if rule.kind == "resource":
            for r in resources:
                out += [(rule.name, Finding(m, r.urn)) for m in rule.check_resource(r, ctx)]
        else:
            out += [(rule.name, f) for f in rule.check_stack(resources, ctx)]
    return out


# Rules that read every resource's location: they do not make a type "covered" on their own.
LOCATION_RULES = frozenset({"eu-data-residency", "eu-location-resolvable"})


def covered(resource_type: str, rules: Sequence[Rule] = ALL_RULES) -> list[str]:
    """Names of the rules other than residency whose type guard accepts this resource type."""
    return [r.name for r in rules if r.name not in LOCATION_RULES and r.covers(resource_type)]


__all__ = ["ALL_RULES", "BY_NAME", "Context", "Finding", "Resource", "Rule", "covered", "evaluate"]
