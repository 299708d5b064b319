"""Plan paths shared by the checks of plan values against cloud API definitions (aws_api_check.py,
gcp_api_check.py, azure_api_check.py): `a.b` members, `a[]` each element of a list, `a{key}` / `a{}` each key / value of a map."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from infra.plan import SECRET_SIG_KEY
from infra.plan_mocks import UNKNOWN

TOKEN = re.compile(r"([^.\[{]+)|(\[\])|(\{key\})|(\{\})")


def split(path: str) -> list[str]:
    """`a[].b{key}` -> ['a', '[]', 'b', '{key}']."""
    out: list[str] = []
    for part in path.split("."):
        out += [m.group(0) for m in TOKEN.finditer(part)]
    return out


def unknown(value: Any) -> bool:
    """Unknown at preview (Pulumi's sentinel, also inside a string) or a secret."""
    if isinstance(value, str):
        return UNKNOWN in value
    return isinstance(value, dict) and SECRET_SIG_KEY in value


def number(value: Any) -> Any:
    """The engine's numbers are floats; integral ones are sent as integers."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def values(node: Any, steps: list[str], where: str = "") -> Iterator[tuple[str, Any]]:
    """The plan values at a path: (concrete location, value)."""
    if not steps:
        yield where, node
        return
    step, rest = steps[0], steps[1:]
    if step == "[]" and isinstance(node, list):
        for i, item in enumerate(node):
            yield from values(item, rest, f"{where}[{i}]")
    elif step == "{key}" and isinstance(node, dict):
        for k in node:
            yield from values(k, rest, f"{where}{{{k!r}}}")
    elif step == "{}" and isinstance(node, dict):
        for k, v in node.items():
            yield from values(v, rest, f"{where}.{k}")
    elif isinstance(node, dict) and step in node:
        yield from values(node[step], rest, f"{where}.{step}" if where else step)


def leaves(node: Any, where: str = "") -> Iterator[str]:
    """Every input path in the plan, lists as `[]` (what a table of API members must cover)."""
    if isinstance(node, dict) and node and not unknown(node):
        for k, v in node.items():
            yield from leaves(v, f"{where}.{k}" if where else k)
    elif isinstance(node, list) and node:
        for v in node:
            yield from leaves(v, f"{where}[]")
    else:
        yield where


@dataclass
class Outcome:
    violations: list[str]
    checked: int = 0
    unknown: int = 0


def mutated(plan_doc: dict[str, Any], name: str, cloud: str, path: str, value: Any) -> dict[str, Any]:
    """A copy of a plan document with one input of the resource `name` (of `cloud`'s types) set to `value`;
    `value` KeyError deletes it. `path` is dotted, list indices as numbers (`taints.0.effect`)."""
    doc = copy.deepcopy(plan_doc)
    (r,) = [r for r in doc["resources"] if r["name"] == name and r["type"].startswith(f"{cloud}:")]
    *parents, leaf = path.split(".")
    node = r["inputs"]
    for step in parents:
        node = node[int(step)] if isinstance(node, list) else node[step]
    if value is KeyError:
        del node[leaf]
    else:
        node[leaf] = value
    return doc
