"""What the rules read and what the fixtures write, checked against the providers' input names.

`read_problems` runs the rules over plans with recording inputs (policy_reads) and resolves each path they
read in the type's provider schema (provider_schema); `write_problems` does the same for the input paths a
fixture declares, or that a mutation adds or changes. Both answer "type: path is no provider input
(...) [did you mean ...]" lines, empty when every name is the provider's.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import policy_reads
import provider_schema
from provider_schema import KeyPath

import policies.rules as rules_pkg
from policies.analyze import plan_from_dict, to_resources
from policies.rules import ALL_RULES, Context, Rule, covered, evaluate
from policies.rules.core import canonical_type

Plan = dict[str, Any]


# Paths a rule reads on purpose although no provider input has them, with why.
READ_ALLOWED: dict[tuple[str, KeyPath], str] = {
    ("policies.rules.network.check_ingress", ("securityRules", "0", "properties")): (
        "an inline NSG rule in the ARM template shape (`properties: {...}`) is read as well as azure-native's "
        "flat SecurityRule inputs"
    ),
}

# Keys a fixture or a case writes on purpose although the provider does not define them, with why.
# (type token, path with list indices as "0") -> reason
WRITE_ALLOWED: dict[tuple[str, KeyPath], str] = {}

# Types no installed provider SDK defines that a fixture declares on purpose, with why.
TYPE_ALLOWED: dict[str, str] = {}


def _explain(type_: str, path: KeyPath) -> str | None:
    why = provider_schema.unresolved(type_, path)
    if why is None:
        return None
    close = provider_schema.close_names(type_, path)
    return why + (f" [did you mean {' / '.join(close)}?]" if close else "")


def reads(plan: Plan, rules: Iterable[Rule] = ALL_RULES) -> set[policy_reads.Read]:
    """(type, path, reader) of every input the rules read while judging the plan."""
    p = plan_from_dict(plan)
    resources = policy_reads.instrument(to_resources(p))
    with policy_reads.recording() as seen:
        evaluate(resources, Context(environment=p.environment), tuple(rules))
    return {(t, _indexless(path), where) for t, path, where in seen}


def _indexless(path: KeyPath) -> KeyPath:
    """One entry per list element read: every index is 0 (the schema accepts any index alike)."""
    return tuple("0" if k.isdigit() else k for k in path)


@functools.cache
def named_types() -> frozenset[str]:
    """Every exact type token the rule modules spell out (their guards and tables) that a provider defines."""
    tokens = set()
    for path in Path(rules_pkg.__file__).parent.glob("*.py"):
        tokens |= set(_TOKEN.findall(path.read_text()))
    return frozenset(canonical_type(t) for t in tokens if provider_schema.unresolved(t, ()) is None)


def guarded_types() -> Iterator[str]:
    """Every type token of the provider SDKs that a rule other than residency applies to."""
    for pkg in provider_schema.PACKAGES.values():
        yield from (t for t in provider_schema.registry(pkg) if covered(t))


_TOKEN = re.compile(r'"((?:aws|gcp|azure-native|kubernetes):[\w./-]+:\w+)"')


def read_problems(all_reads: Iterable[policy_reads.Read], declared: Iterable[str] = ()) -> list[str]:
    """Each path a rule reads is an input of the type it reads it on; a generic probe's path (one function
    reading the same key on several types, policy_reads.GENERIC_PROBES) of at least one of them."""
    by_probe: dict[tuple[str, KeyPath], set[str]] = {}
    out = []
    all_reads = set(all_reads)
    for type_, path, where in sorted(all_reads):
        if where in policy_reads.GENERIC_PROBES:
            by_probe.setdefault((where, path), set()).add(type_)
            continue
        why = _explain(type_, path)
        if why is not None and (where, path) not in READ_ALLOWED:
            out.append(f"{where} reads {why}")
    # A probe's key must be an input of some type the plans declare, the pack names or reads, or a rule's
    # guard covers (a misspelt key is of none). Checked lazily: most keys resolve on the first types.
    seen = {t for t, _, _ in all_reads} | {canonical_type(t) for t in declared} | named_types()
    for (where, path), read_on in sorted(by_probe.items()):
        if (where, path) in READ_ALLOWED:
            continue
        candidates = itertools.chain(sorted(read_on), sorted(seen), guarded_types())
        if not any(provider_schema.unresolved(t, path) is None for t in candidates):
            out.append(
                f"{where} probes '{provider_schema.dotted(path)}', an input of no type the pack covers"
            )
    return out


def leaves(value: Any, prefix: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    """(path, value) of every leaf of an inputs tree; an empty block or list is a leaf too."""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, (*prefix, str(k)))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from leaves(v, (*prefix, str(i)))
    elif prefix:
        yield prefix, value


def _resource_paths(r: dict[str, Any]) -> dict[KeyPath, Any]:
    return dict(leaves(r.get("inputs") or {}))


def written(base: Plan | None, plan: Plan) -> set[tuple[str, KeyPath]]:
    """(type, path) of each input `plan` declares that `base` does not (all of them when base is None)."""
    before = {r["urn"]: _resource_paths(r) for r in (base or {"resources": []})["resources"]}
    out = set()
    for r in plan["resources"]:
        old = before.get(r["urn"], {})
        for path, value in _resource_paths(r).items():
            if path not in old or old[path] != value:
                out.add((r["type"], _indexless(path)))
    return out


def write_problems(writes: Iterable[tuple[str, KeyPath]], where: str) -> list[str]:
    out = []
    for type_, path in sorted(set(writes)):
        if (type_, path) in WRITE_ALLOWED or type_ in TYPE_ALLOWED:
            continue
        why = _explain(type_, path)
        if why is not None:
            out.append(f"{where} writes {why}")
    return out


def mutated(make: Callable[[], Plan], mutate: Callable[[Plan], None]) -> tuple[Plan, Plan]:
    base = make()
    plan = make()
    mutate(plan)
    return base, plan
