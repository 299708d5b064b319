"""Judging plan values by botocore's service models: the shape at an API member path, Java patterns in Python,
the values a member's documentation lists, and which plan inputs the table (aws_api_table.py) covers."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import botocore.session
import regex
from api_paths import Outcome, leaves, split, values
from api_paths import number as _number
from api_paths import unknown as _unknown
from aws_api_table import AUTONAME_SUFFIX, AUTONAMED, PROVIDER_ONLY, TABLE, Call
from infra_fixtures import Plan

from infra.config import limits


@functools.cache
def _model(service: str) -> Any:
    return botocore.session.get_session().get_service_model(service)


def api_shape(call: Call, member_path: str) -> Any:
    """The botocore shape at an API member path; KeyError naming the first missing step."""
    shape = _model(call.service).operation_model(call.operation).input_shape
    for step in split(member_path):
        if step == "[]" and shape.type_name == "list":
            shape = shape.member
        elif step == "{key}" and shape.type_name == "map":
            shape = shape.key
        elif step == "{}" and shape.type_name == "map":
            shape = shape.value
        elif shape.type_name == "structure" and step in shape.members:
            shape = shape.members[step]
        else:
            raise KeyError(f"{call.service} {call.operation}: no {step!r} in {member_path!r} ({shape.name})")
    return shape


# Java regular expressions (the service side) in Python's `regex`: a surrogate pair spells one code point,
# `[\w-_]` is a literal hyphen, and an inline flag mid-pattern applies to the rest of its group only.
def _java_regex(pattern: str) -> regex.Pattern[str]:
    p = pattern.replace(r"\uD800\uDC00-\uDBFF\uDFFF", r"\U00010000-\U0010FFFF").replace(r"\w-_", r"\w\-_")
    start = p.find("(?i)")
    if start > 0:
        depth, end = 0, len(p)
        for i in range(start + 4, len(p)):
            if p[i - 1] == "\\":
                continue
            depth += {"(": 1, ")": -1}.get(p[i], 0)
            if depth < 0:
                end = i
                break
        p = p[:start] + "(?i:" + p[start + 4 : end] + ")" + p[end:]
    return regex.compile(p, regex.VERSION1)


PATTERNS = functools.cache(_java_regex)


# Values a member's documentation lists where the model has no enum or range (the model is still the source).
def _doc_values(doc: str, marker: str) -> list[str]:
    found = re.search(marker, doc)
    if not found:
        raise RuntimeError(f"botocore documentation no longer says {marker!r}: update this test")
    return [v.strip() for v in found.group(1).split("|")]


DOCUMENTED: dict[tuple[str, str, str], Callable[[Any, str], str | None]] = {
    ("logs", "PutRetentionPolicy", "retentionInDays"): lambda v, _doc: (
        None
        if v in limits.cloudwatch_retention_days()
        else f"not one of CloudWatch Logs' retention values {limits.cloudwatch_retention_days()} "
        f"({limits.CLOUDWATCH_SOURCE})"
    ),
    ("cloudwatch", "PutMetricAlarm", "TreatMissingData"): lambda v, doc: (
        None
        if v in (ok := _doc_values(doc, r"Valid Values: <code>([^<]+)</code>"))
        else f"not one of {ok} (documented valid values)"
    ),
    ("cloudwatch", "PutMetricAlarm", "Period"): lambda v, doc: (
        None
        if _doc_values(doc, r"Valid values are (10, 20, 30, and any multiple of 60)")
        and (v in (10, 20, 30) or v % 60 == 0)
        else "not 10, 20, 30 or a multiple of 60 (documented valid values)"
    ),
    ("kms", "ScheduleKeyDeletion", "PendingWindowInDays"): lambda v, doc: (
        None
        if (m := re.search(r"between (\d+) and (\d+), inclusive", doc)) and int(m[1]) <= v <= int(m[2])
        else "outside the documented 7..30 days (or the documentation changed)"
    ),
}


def shape_problem(value: Any, shape: Any) -> str | None:
    """Why the API refuses this value for this shape, or None (botocore's constraints, service-side rules)."""
    meta, kind = shape.metadata, shape.type_name
    lo, hi = meta.get("min"), meta.get("max")
    if kind in ("list", "map"):
        if not isinstance(value, list | dict):
            return f"expected a {kind}"
        if (lo is not None and len(value) < lo) or (hi is not None and len(value) > hi):
            return f"{len(value)} items; {shape.name} takes {lo or 0}..{hi if hi is not None else '∞'}"
        return None
    if kind == "string":
        if not isinstance(value, str):
            return f"expected a string, got {type(value).__name__}"
        if "enum" in meta and value not in meta["enum"]:
            return f"not in {shape.name} enum {meta['enum']}"
        if (lo is not None and len(value) < lo) or (hi is not None and len(value) > hi):
            return f"length {len(value)}; {shape.name} takes {lo or 0}..{hi if hi is not None else '∞'}"
        # AWS validates the whole value (Coral's "Member must satisfy regular expression pattern").
        if "pattern" in meta and not PATTERNS(meta["pattern"]).fullmatch(value):
            return f"does not match {shape.name} pattern {meta['pattern']!r}"
        return None
    if kind in ("integer", "long", "double", "float"):
        value = _number(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"expected a number, got {type(value).__name__}"
        if kind in ("integer", "long") and not isinstance(value, int):
            return f"{shape.name} is an integer"
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return f"{shape.name} takes {lo if lo is not None else '-∞'}..{hi if hi is not None else '∞'}"
        return None
    if kind == "boolean":
        # Terraform keeps some booleans as strings to tell unset from false (launch template EBS flags).
        ok = isinstance(value, bool) or value in ("true", "false")
        return None if ok else f"expected a boolean, got {value!r}"
    return None


def check_resource(stack: str, r: dict[str, Any], out: Outcome) -> None:
    inputs = dict(r["inputs"])
    if r["type"] in AUTONAMED and AUTONAMED[r["type"]] not in inputs:
        inputs[AUTONAMED[r["type"]]] = r["name"] + AUTONAME_SUFFIX
    for call in TABLE[r["type"]]:
        for plan_path, member_path in call.members.items():
            shape = api_shape(call, member_path)
            doc_rule = DOCUMENTED.get((call.service, call.operation, member_path))
            for where, value in values(inputs, split(plan_path), ""):
                if _unknown(value) or (isinstance(value, list) and any(_unknown(v) for v in value)):
                    out.unknown += 1
                    continue
                if plan_path in call.transforms:
                    value = call.transforms[plan_path](value)
                value = _number(value)
                problems = [shape_problem(value, shape)]
                if problems == [None] and doc_rule:
                    problems = [doc_rule(value, shape.documentation)]
                problems += _element_problems(value, shape)
                out.checked += 1
                for p in filter(None, problems):
                    out.violations.append(
                        f"{stack}: {r['name']} ({r['type']}) {where} = {value!r}: "
                        f"{call.service} {call.operation} {member_path}: {p}"
                    )


def _element_problems(value: Any, shape: Any) -> list[str | None]:
    """A list or map of scalars is checked element by element too."""
    if shape.type_name == "list" and isinstance(value, list) and shape.member.type_name not in ("structure",):
        return [f"[{i}] = {v!r}: {p}" if (p := shape_problem(_number(v), shape.member)) else None
                for i, v in enumerate(value) if not _unknown(v)]  # fmt: skip
    if shape.type_name == "map" and isinstance(value, dict):
        out: list[str | None] = []
        for k, v in value.items():
            out.append(f"key {k!r}: {p}" if (p := shape_problem(k, shape.key)) else None)
            if shape.value.type_name != "structure" and not _unknown(v):
                out.append(f"[{k!r}] = {v!r}: {p}" if (p := shape_problem(_number(v), shape.value)) else None)
        return out
    return []


def check_plan(stack: str, p: Plan) -> Outcome:
    out = Outcome([])
    for r in p.iter_custom():
        if r["type"].startswith("aws:"):
            check_resource(stack, r, out)
    return out


def _covers(call: Call, plan_path: str, leaf: str) -> bool:
    """A mapped path covers a leaf it names, or any leaf under it where the API takes a map or a scalar list
    (each element is checked), or under a plan map sent as key/value structures."""
    base = re.sub(r"(\{key\}|\{\})$", "", plan_path)
    if leaf == base:
        return True
    if not leaf.startswith((f"{base}.", f"{base}[]")):
        return False
    if base != plan_path:
        return True
    shape = api_shape(call, call.members[plan_path])
    return shape.type_name == "map" or (shape.type_name == "list" and shape.member.type_name != "structure")


def uncovered(p: Plan) -> list[str]:
    out = []
    for r in p.iter_custom():
        t = r["type"]
        if not t.startswith("aws:"):
            continue
        if t not in TABLE:
            out.append(f"{r['name']}: resource type {t} is not in aws_api_table.TABLE")
            continue
        for leaf in set(leaves(r["inputs"])):
            top = re.split(r"[.\[]", leaf, maxsplit=1)[0]
            if top in PROVIDER_ONLY.get(t, {}):
                continue
            if not any(_covers(c, path, leaf) for c in TABLE[t] for path in c.members):
                out.append(f"{r['name']} ({t}): input {leaf} maps to no API member in aws_api_table.TABLE")
    return out
