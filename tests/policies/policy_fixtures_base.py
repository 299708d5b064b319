"""What every compliant fixture stack is made of: project, tags, placeholder values, resource builders.

The per-cloud fixture modules build their resources with `res` so that each carries the URN, parent,
provider and dependency edges the mock engine would record; KEY_ARN and UNKNOWN stand for values the
engine resolves (the data key's ARN) or leaves unknown at preview.
"""

from __future__ import annotations

import copy
import json
from typing import Any

PROJECT = "eu-ml-platform"
TAGS = {
    "project": "eu-ml-platform",
    "environment": "dev",
    "owner": "ml-platform",
    "cost-centre": "cc-1234",
    "data-classification": "confidential",
}
KEY_ARN = "arn:aws:kms:eu-south-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


# Provider config reaches the engine JSON-encoded (as in infra's plans): "defaultTags": "{\"tags\": ...}".


def urn(stack: str, type_: str, name: str) -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{type_}::{name}"


def res(stack: str, type_: str, name: str, inputs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    deps = list(extra.get("dependencies", []))
    if KEY_ARN in json.dumps(inputs):
        # KEY_ARN stands for the data-key's ARN as the engine resolves it; the engine records the edge.
        deps.append(urn(stack, "aws:kms/key:Key", "data-key"))
    return {
        "urn": urn(stack, type_, name),
        "type": type_,
        "name": name,
        "inputs": copy.deepcopy(inputs),
        "parent": extra.get("parent"),
        "dependencies": deps,
        "provider": extra.get("provider"),
    }


def find(plan: dict[str, Any], type_: str, name: str) -> dict[str, Any]:
    return next(r for r in plan["resources"] if r["type"] == type_ and r["name"] == name)


def clone(plan: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(plan)
