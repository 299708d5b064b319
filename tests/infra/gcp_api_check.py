"""Judging plan values by Google's own API definitions: the discovery documents google-api-python-client
bundles (googleapiclient/discovery_cache/documents). A member's schema gives its type, `enum`, `format`
(int32, int64 as a string, google-duration...) and, for path parameters and some names, a `pattern`; limits
the schema does not encode are stated in the member's description, and those rules (gcp_api_rules.py) read
their numbers from that text, so a changed description fails instead of being checked against stale limits."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import googleapiclient
from api_paths import Outcome, leaves, number, split, unknown, values
from gcp_api_rules import LABEL_MEMBERS, RULES, label_problems
from gcp_api_table import PROVIDER_ONLY, TABLE, Call
from infra_fixtures import Plan

DOCUMENTS = Path(googleapiclient.__file__).parent / "discovery_cache" / "documents"
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
# google.protobuf.Duration in JSON: seconds with up to nine fractional digits, suffixed `s`
# (protobuf.dev/reference/protobuf/google.protobuf/#duration); at most 315,576,000,000 s either way.
DURATION = re.compile(r"-?(\d+)(\.\d{1,9})?s")
MAX_DURATION_S = 315_576_000_000


@functools.cache
def document(api: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DOCUMENTS / f"{api}.json").read_text())
    return doc


def _methods(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in node.get("resources", {}).values():
        yield from resource.get("methods", {}).values()
        yield from _methods(resource)


@functools.cache
def method(api: str, method_id: str) -> dict[str, Any]:
    for m in _methods(document(api)):
        if m["id"] == method_id:
            return m
    raise KeyError(f"{api}: no method {method_id}")


@dataclass(frozen=True)
class Member:
    """A schema node and its name in the document (`Schema.property`, `method?parameter`), for messages and
    for the description rules."""

    schema: dict[str, Any]
    label: str


def _resolve(api: str, schema: dict[str, Any], label: str) -> Member:
    if "$ref" in schema:
        return Member(document(api)["schemas"][schema["$ref"]], schema["$ref"])
    return Member(schema, label)


def member(call: Call, member_path: str) -> Member:
    """The schema at an API member path; KeyError naming the first missing step. `?name` is a parameter of
    the method (path or query), anything else a path into the request body."""
    m = method(call.api, call.method)
    if member_path.startswith("?"):
        name = member_path[1:]
        if name not in m.get("parameters", {}):
            raise KeyError(f"{call.api} {call.method}: no parameter {name!r}")
        return Member(m["parameters"][name], f"{call.method}?{name}")
    if "request" not in m:
        raise KeyError(f"{call.api} {call.method}: takes no request body (for {member_path!r})")
    cur = _resolve(call.api, m["request"], "")
    for step in split(member_path):
        s = cur.schema
        if step == "[]" and s.get("type") == "array":
            cur = _resolve(call.api, s["items"], cur.label + "[]")
        elif step == "{key}" and "additionalProperties" in s:
            cur = Member({"type": "string"}, cur.label + "{key}")
        elif step == "{}" and "additionalProperties" in s:
            cur = _resolve(call.api, s["additionalProperties"], cur.label + "{}")
        elif step in s.get("properties", {}):
            cur = _resolve(call.api, s["properties"][step], f"{cur.label}.{step}")
        else:
            raise KeyError(f"{call.api} {call.method}: no {step!r} in {member_path!r} ({cur.label})")
    return cur


def _integer(value: Any, bounds: tuple[int, int], fmt: str) -> str | None:
    if isinstance(value, str) and fmt in ("int64", "uint64") and re.fullmatch(r"-?\d+", value):
        value = int(value)  # the JSON mapping sends 64-bit integers as strings; numbers are accepted too
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an {fmt} integer, got {value!r}"
    lo = 0 if fmt.startswith("u") else bounds[0]
    return None if lo <= value <= bounds[1] else f"outside {fmt} range {lo}..{bounds[1]}"


def duration_seconds(value: str) -> float | None:
    found = DURATION.fullmatch(value)
    return float(value[:-1]) if found else None


def schema_problem(value: Any, schema: dict[str, Any]) -> str | None:
    """Why the API refuses this value for this schema (its type, enum, format, pattern), or None."""
    kind, fmt = schema.get("type", "object" if "properties" in schema else None), schema.get("format", "")
    if kind == "string":
        if fmt in ("int64", "uint64"):
            return _integer(value, INT64, fmt)
        if not isinstance(value, str):
            return f"expected a string, got {type(value).__name__}"
        if "enum" in schema and value not in schema["enum"]:
            return f"not in the enum {schema['enum']}"
        if fmt == "google-duration":
            seconds = duration_seconds(value)
            if seconds is None or abs(seconds) > MAX_DURATION_S:
                return "not a google-duration (seconds with up to 9 decimals and an 's', e.g. '3600s')"
        # Google's patterns are RE2 over the whole value (compute's lack the anchors, others carry them).
        if "pattern" in schema and not re.fullmatch(schema["pattern"].strip("^$"), value):
            return f"does not match the pattern {schema['pattern']!r}"
        return None
    if kind == "integer":
        return _integer(number(value), INT32, fmt or "int32")
    if kind == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else f"expected a number, got {value!r}"
    if kind == "boolean":
        return None if isinstance(value, bool) else f"expected a boolean, got {value!r}"
    if kind == "array":
        return None if isinstance(value, list) else f"expected a list, got {type(value).__name__}"
    if kind == "object":
        return None if isinstance(value, dict) else f"expected an object, got {type(value).__name__}"
    return None


def _provider_inputs(p: Plan, r: dict[str, Any]) -> dict[str, Any]:
    urn = r.get("provider", "").rsplit("::", 1)[0]
    found = p.by_urn.get(urn)
    return found["inputs"] if found else {}


def _fill(template: str, inputs: dict[str, Any]) -> str | None:
    """A path parameter built from plan inputs (`projects/{project}/topics/{name}`); None if an input lacks.
    `{x|last}`: the provider takes `x` as a full resource name or a short one and uses its last segment."""
    fields = re.findall(r"\{(\w+)(\|last)?\}", template)
    if any(n not in inputs or not isinstance(inputs[n], str) for n, _ in fields):
        return None
    return re.sub(
        r"\{(\w+)(\|last)?\}",
        lambda m: inputs[m[1]].rsplit("/", 1)[-1] if m[2] else inputs[m[1]],
        template,
    )


def _check(
    stack: str, r: dict[str, Any], call: Call, path: str, where: str, value: Any, out: Outcome
) -> None:
    if unknown(value) or (isinstance(value, list) and any(unknown(v) for v in value)):
        out.unknown += 1
        return
    mem = member(call, path)
    value = number(value)
    problems = [schema_problem(value, mem.schema)]
    rule = RULES.get((call.api, mem.label))
    if problems == [None] and rule is not None:
        problems = [rule(value, mem.schema.get("description", ""))]
    if mem.label in LABEL_MEMBERS.get(call.api, ()) and isinstance(value, dict):
        problems += label_problems(value)
    elif mem.schema.get("type") == "array" and isinstance(value, list):
        item = _resolve(call.api, mem.schema["items"], mem.label + "[]")
        item_rule = RULES.get((call.api, item.label))
        for i, v in enumerate(value):
            p = schema_problem(number(v), item.schema) or (
                item_rule and item_rule(v, item.schema.get("description", ""))
            )
            problems.append(f"[{i}] = {v!r}: {p}" if p else None)
    out.checked += 1
    for p in filter(None, problems):
        out.violations.append(
            f"{stack}: {r['name']} ({r['type']}) {where} = {value!r}: {call.api} {call.method} {mem.label}: {p}"
        )


def check_resource(stack: str, p: Plan, r: dict[str, Any], out: Outcome) -> None:
    inputs = {**_provider_inputs(p, r), **r["inputs"]}
    for call in TABLE[r["type"]]:
        for plan_path, member_path in call.members.items():
            for where, value in values(r["inputs"], split(plan_path)):
                if value == "" and not member_path.startswith("?"):
                    continue  # the provider leaves empty strings out of the request (tpgresource.IsEmptyValue)
                _check(stack, r, call, member_path, where, value, out)
        for param, template in call.params.items():
            filled = _fill(template, inputs)
            if filled is None:
                raise KeyError(f"{r['name']}: {call.method}?{param} needs inputs {template!r}")
            _check(stack, r, call, f"?{param}", f"{param}<-{template}", filled, out)


def check_plan(stack: str, p: Plan) -> Outcome:
    out = Outcome([])
    for r in p.iter_custom():
        if r["type"].startswith("gcp:"):
            check_resource(stack, p, r, out)
    return out


def _covers(call: Call, plan_path: str, leaf: str) -> bool:
    """A mapped path covers a leaf it names, or the leaves under it where the API takes a map or a list
    of scalars (each element is checked)."""
    if leaf == plan_path:
        return True
    if not leaf.startswith((f"{plan_path}.", f"{plan_path}[]")):
        return False
    schema = member(call, call.members[plan_path]).schema
    return "additionalProperties" in schema or (
        schema.get("type") == "array"
        and "$ref" not in schema["items"]
        and "properties" not in schema["items"]
    )


def uncovered(p: Plan) -> list[str]:
    out = []
    for r in p.iter_custom():
        t = r["type"]
        if not t.startswith("gcp:"):
            continue
        if t not in TABLE:
            out.append(f"{r['name']}: resource type {t} is not in gcp_api_table.TABLE")
            continue
        for leaf in sorted(set(leaves(r["inputs"]))):
            top = re.split(r"[.\[]", leaf, maxsplit=1)[0]
            if top in PROVIDER_ONLY.get(t, {}) or leaf in PROVIDER_ONLY.get(t, {}):
                continue
            # A path parameter covers the inputs its template names.
            named = rf"\{{{re.escape(leaf)}(\|last)?\}}"
            if any(re.search(named, tpl) for c in TABLE[t] for tpl in c.params.values()):
                continue
            if not any(_covers(c, path, leaf) for c in TABLE[t] for path in c.members):
                out.append(f"{r['name']} ({t}): input {leaf} maps to no API member in gcp_api_table.TABLE")
    return out
