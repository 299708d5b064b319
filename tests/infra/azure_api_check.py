"""Judging the Azure stack's plan values by Azure's REST definitions (azure_sdk_schema.py reads them from the
azure-mgmt-* SDKs; azure_api_table.py says which body model and path parameters each resource type is)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from api_paths import number as _number
from api_paths import unknown as _unknown
from azure_api_table import FILLED, PROVIDER_ONLY, RENAMED, TABLE, UNMODELLED, Api, Spec, model_of
from azure_sdk_schema import Member, members, subtype, url_parameters
from infra_fixtures import Plan

# Extensible enums ("x-ms-enum modelAsString"): ARM may take values beyond the known ones, but a value outside
# them is a violation unless listed here, (resource type, input path) -> values, with why. None today: every
# enum value the Azure stack sends is one of the known values.
EXTENSIBLE: dict[tuple[str, str], tuple[str, ...]] = {}


def plan_key(rest: str) -> str:
    """azure-native's input name for a REST member: `odata.type` -> `odataType`."""
    head, *rest_parts = re.split(r"[.\0]", rest)
    return head + "".join(p[:1].upper() + p[1:] for p in rest_parts)


def plan_members(cls: type, value: dict[str, Any] | None = None) -> dict[str, Member]:
    """Plan key -> Member of a body model: `properties` members flattened to the top, as azure-native does."""
    if value is not None:
        cls = subtype(cls, value, plan_key)
    out: dict[str, Member] = {}
    for rest, m in members(cls).items():
        if rest.startswith("properties."):
            out[plan_key(rest.removeprefix("properties."))] = m
        elif rest == "properties" and m.kind == "model" and m.model and not (value and "properties" in value):
            out.update(plan_members(m.model, value.get("properties") if value else None))
        else:
            out[plan_key(rest)] = m
    for key, rest in RENAMED.get(f"{cls.__module__.split('.')[2]}.{cls.__name__}", {}).items():
        out[key] = members(cls)[rest]
    return out


def limit_problems(value: Any, limits: dict[str, Any]) -> list[str]:
    """The spec's constraints (msrest `_validation` / `_SERIALIZER.url` names) a value breaks."""
    out = []
    size = len(value) if isinstance(value, str | list | dict) else None
    for name, bound in limits.items():
        too_few = name in ("min_length", "min_items") and size is not None and size < bound
        too_many = name in ("max_length", "max_items") and size is not None and size > bound
        if too_few or too_many:
            out.append(f"{size} {'characters' if isinstance(value, str) else 'items'}; {name} {bound}")
        elif name == "pattern" and isinstance(value, str) and not re.search(bound, value):
            out.append(f"does not match pattern {bound!r}")
        elif name == "minimum" and isinstance(value, int | float) and value < bound:
            out.append(f"below minimum {bound}")
        elif name == "maximum" and isinstance(value, int | float) and value > bound:
            out.append(f"above maximum {bound}")
    return out


def spec_limits(spec: Spec) -> dict[str, Any]:
    return {k: v for k, v in (("min_length", spec.min_length), ("max_length", spec.max_length),
                              ("pattern", spec.pattern)) if v is not None}  # fmt: skip


@dataclass
class Outcome:
    violations: list[str] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)
    checked: int = 0
    unknown: int = 0
    unmodelled: int = 0


@dataclass
class _Walk:
    out: Outcome
    head: str  # "<stack>: <name> (<type>)"
    token: str

    def bad(self, where: str, value: Any, problem: str) -> None:
        self.out.violations.append(f"{self.head} {where} = {value!r}: {problem}")

    def value(self, value: Any, m: Member, where: str) -> None:
        if _unknown(value) or (isinstance(value, list) and value and all(_unknown(v) for v in value)):
            self.out.unknown += 1
            return
        value = _number(value)
        self.out.checked += 1
        if m.readonly:
            self.bad(where, value, f"{m.rest} is read-only in the REST spec (ARM ignores or refuses it)")
            return
        problems = self._kind(value, m, where) + limit_problems(value, m.limits)
        if problems:
            self.bad(where, value, "; ".join(problems))

    def _kind(self, value: Any, m: Member, where: str) -> list[str]:
        kind = m.kind
        if kind == "str":
            if not isinstance(value, str):
                return [f"{m.rest} is a string, got {type(value).__name__}"]
            if (
                m.enum
                and value not in m.enum
                and value not in EXTENSIBLE.get((self.token, where.split("[")[0]), ())
            ):
                return [f"not one of {m.rest}'s known values {list(m.enum)}"]
            return []
        if kind == "int":
            return (
                [] if isinstance(value, int) and not isinstance(value, bool) else [f"{m.rest} is an integer"]
            )
        if kind == "float":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            return [] if ok else [f"{m.rest} is a number"]
        if kind == "bool":
            return [] if isinstance(value, bool) else [f"{m.rest} is a boolean"]
        if kind == "list":
            if not isinstance(value, list):
                return [f"{m.rest} is a list"]
            for i, v in enumerate(value):
                self._element(v, m.item, f"{where}[{i}]")
            return []
        if kind == "dict":
            # azure-native takes userAssignedIdentities as a list of ids and sends them as the map's keys
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return []
            if not isinstance(value, dict):
                return [f"{m.rest} is a map"]
            for k, v in value.items():
                self._element(v, m.item, f"{where}.{k}")
            return []
        if kind == "model":
            if not isinstance(value, dict):
                return [f"{m.rest} is an object"]
            assert m.model is not None
            self.body(value, m.model, where)
        return []

    def _element(self, value: Any, m: Member | None, where: str) -> None:
        if m is None or m.kind == "any":
            self.out.checked += 1
        elif m.kind == "model":
            if _unknown(value):
                self.out.unknown += 1
            elif isinstance(value, dict):
                assert m.model is not None
                self.out.checked += 1
                self.body(value, m.model, where)
            else:
                self.bad(where, value, f"{m.rest} takes objects")
        else:
            self.value(value, m, where)

    def body(self, value: dict[str, Any], cls: type, where: str, skip: frozenset[str] = frozenset()) -> None:
        known = plan_members(cls, value)
        for key, v in value.items():
            here = f"{where}.{key}" if where else key
            if key in skip:
                continue
            if key not in known:
                self.out.uncovered.append(f"{self.head}: input {here} maps to no member of {cls.__name__}")
                continue
            self.value(v, known[key], here)
        filled = FILLED["*"] | FILLED.get(self.token, set())
        for key, m in known.items():
            if m.required and not m.readonly and key not in value and key not in filled:
                self.bad(f"{where}.{key}" if where else key, None, f"{cls.__name__}.{m.rest} is required")


def _path_limits(api: Api, key: str) -> dict[str, Any]:
    where = api.path[key]
    if isinstance(where, Spec):
        return spec_limits(where)
    return url_parameters(where)[key]


def check_resource(stack: str, r: dict[str, Any], out: Outcome) -> None:
    token, inputs = r["type"], r["inputs"]
    head = f"{stack}: {r['name']} ({token})"
    if token in UNMODELLED:
        out.unmodelled += len(inputs)
        out.uncovered += [
            f"{head}: input {k} is not listed in UNMODELLED" for k in inputs if k not in UNMODELLED[token]
        ]
        return
    if token not in TABLE:
        out.uncovered.append(f"{head}: resource type {token} is not in azure_api_table.TABLE")
        return
    api, walk = TABLE[token], _Walk(out, head, token)
    for key in api.path:
        if key in inputs:
            value = inputs[key]
            if _unknown(value):
                out.unknown += 1
                continue
            out.checked += 1
            if problems := limit_problems(value, _path_limits(api, key)):
                walk.bad(key, value, f"path parameter {key}: {'; '.join(problems)}")
    body = {k: v for k, v in inputs.items() if k not in api.path}
    walk.body(body, model_of(api), "", skip=frozenset(PROVIDER_ONLY.get(token, {})))
    for rest, spec in api.body.items():
        if rest in body and not _unknown(body[rest]):
            out.checked += 1
            if problems := limit_problems(body[rest], spec_limits(spec)):
                walk.bad(rest, body[rest], f"{rest}: {'; '.join(problems)} ({spec.source})")


def check_plan(stack: str, p: Plan) -> Outcome:
    out = Outcome()
    for r in p.iter_custom():
        if r["type"].startswith("azure-native:"):
            check_resource(stack, r, out)
    return out
