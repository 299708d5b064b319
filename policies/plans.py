"""Offline plans (reports/plan/<stack>.json, written by infra/plan.py) as the engine would send them.

Validation of the plan contract, the engine's wire form of values (unknown sentinels, secrets, resource
references) and the provider each resource uses. No gRPC here: tests and the report use this directly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.rules import Resource
from policies.rules.core import UNKNOWN_SENTINELS, UNKNOWN_STRING

# Signatures of Pulumi's special property values (sdk/go/common/resource/properties.go).
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_REF_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
# Pulumi's stack name alphabet; the name also becomes the result file `<out>/<stack>.json`, so a name
# with a separator ('../prod', 'a/b') would write outside --out or fail after the whole analysis.
_STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_CLOUDS = ("aws", "gcp", "azure")


class PlanError(ValueError):
    """A plan file is missing or does not follow the contract; the message names the file and field."""


@dataclass(frozen=True)
class Plan:
    path: Path
    stack: str
    cloud: str
    project: str
    environment: str
    region: str
    resources: list[dict[str, Any]]
    sha256: str = ""
    """Of the bytes analysed (load_plan); "" for a plan made in memory."""


def load_plan(path: Path) -> Plan:
    if path.is_dir():
        raise PlanError(f"{path} is a folder; pass its plan files ({path / '*.json'}), one per stack")
    if not path.is_file():
        raise PlanError(
            f"{path}: no such plan file (generate plans with `python -m infra.plan --out reports/plan`)"
        )
    try:
        # One read: the hash a result records is of the bytes judged, even if the file is rewritten mid-run.
        raw = path.read_bytes()
        data = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (OSError, UnicodeDecodeError) as err:
        raise PlanError(f"{path}: cannot read the plan ({err}); infra.plan writes UTF-8 JSON") from err
    except (json.JSONDecodeError, ValueError) as err:
        raise PlanError(f"{path}: not valid JSON ({err})") from err
    return dataclasses.replace(plan_from_dict(data, path), sha256=hashlib.sha256(raw).hexdigest())


def _other_document(data: dict[str, Any]) -> str:
    """What a JSON file a reviewer might take for a plan is, by keys a plan never has; "" if none of them. A
    runner result has `stack`, `cloud` and `resources` (without inputs): it passed as a plan and was analysed
    as a stack of empty resources."""
    if "steps" in data or "changeSummary" in data:
        return "`pulumi preview --json` output"
    if "deployment" in data and "version" in data:
        return "a `pulumi stack export` checkpoint"
    if (
        data.get("schema") == "policies.analyze/stack-result-v1"
        or {"violations", "plan_sha256"} <= data.keys()
    ):
        return "a result of `python -m policies.analyze` (reports/policy/<stack>.json)"
    return ""


def _refuse_constant(name: str) -> Any:
    # NaN/Infinity are not JSON; the engine's wire form (protobuf Struct) cannot carry them either, so the
    # pack would fail mid-run with an RPC error that reads as "the pack could not start" (exit 3).
    raise ValueError(f"{name} is not a JSON value (write a number, or the unknown sentinel)")


def plan_from_dict(data: Any, path: Path = Path("<memory>")) -> Plan:
    """Validate a plan (the contract in infra/README.md) and wrap it; PlanError names the bad field."""
    if not isinstance(data, dict):
        raise PlanError(f"{path}: a plan is a JSON object with stack, cloud, environment, region, resources")
    other = _other_document(data)
    if other:
        raise PlanError(
            f"{path}: this looks like {other}, not a plan; the runner reads the plans infra.plan renders "
            "(`python -m infra.plan --out reports/plan`)"
        )
    for key in ("stack", "cloud", "resources"):
        if key not in data:
            raise PlanError(f"{path}: missing field {key!r}")
    if not isinstance(data["resources"], list):
        raise PlanError(f"{path}: 'resources' must be a list")
    if not isinstance(data["stack"], str) or not _STACK_NAME.fullmatch(data["stack"]):
        raise PlanError(
            f"{path}: stack={data['stack']!r} is not a stack name (letters, digits, '-', '_', '.'; as Pulumi names stacks)"
        )
    # str(None) would make a null field the word "None" (a region "None", an environment "None" assessed as
    # prod), with no hint that the plan was at fault.
    if data["cloud"] not in _CLOUDS:
        raise PlanError(f"{path}: cloud={data['cloud']!r} is not one of {list(_CLOUDS)}")
    for key in ("project", "environment", "region"):
        if key in data and not isinstance(data[key], str):
            raise PlanError(f"{path}: {key}={data[key]!r} must be a string (or the field left out)")
    for n, r in enumerate(data["resources"]):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in ("urn", "type", "name")):
            raise PlanError(f"{path}: resources[{n}] needs string 'urn', 'type' and 'name'")
        if not isinstance(r.get("inputs", {}), dict):
            raise PlanError(f"{path}: resources[{n}].inputs must be an object")
        # Fields the runner hands to the engine protocol as strings: a wrong type was a TypeError
        # mid-run (exit 1, which reads as "a mandatory violation").
        for key in ("parent", "provider"):
            if r.get(key) is not None and not isinstance(r[key], str):
                raise PlanError(f"{path}: resources[{n}].{key} must be a URN string")
        deps = r.get("dependencies")
        if deps is not None and not (isinstance(deps, list) and all(isinstance(d, str) for d in deps)):
            raise PlanError(f"{path}: resources[{n}].dependencies must be a list of URN strings")
    return Plan(
        path=path,
        stack=data["stack"],
        cloud=str(data["cloud"]),
        project=str(data.get("project", "eu-ml-platform")),
        environment=str(data.get("environment", "")),
        region=str(data.get("region", "")),
        resources=data["resources"],
    )


def to_wire(value: Any) -> Any:
    """Plan values as the engine sends them: unknowns become the engine's unknown sentinel.

    infra/plan.py writes an unknown as the engine's own sentinel string (kept; an object
    {"unknown": true} or the string "<unknown>" is normalised to it too), secrets as the engine's secret
    envelope (unwrapped, as the pack does) and resource references as their envelope (replaced by the
    id or URN, as the engine does for analyzers).
    """
    if isinstance(value, dict):
        if value.get("unknown") is True or value.get("__unknown__") is True:
            return UNKNOWN_STRING
        sig = value.get(_SIG_KEY)
        if sig == _SECRET_SIG:
            return to_wire(
                value.get("value")
            )  # the pack unwraps secrets too; policies never see the envelope
        if sig == _RESOURCE_REF_SIG:
            # The engine hands analyzers a resource reference as the resource's id (or URN for components).
            # A custom resource's id may be empty (unknown at preview): unknown. A component has no id: URN.
            if "id" in value:
                return to_wire(value["id"]) if value["id"] else UNKNOWN_STRING
            return value.get("urn") or UNKNOWN_STRING
        return {k: to_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_wire(v) for v in value]
    if isinstance(value, str) and (value in UNKNOWN_SENTINELS or value == "<unknown>"):
        return UNKNOWN_STRING
    return value


def provider_index(plan: Plan) -> dict[str, dict[str, Any]]:
    return {r["urn"]: r for r in plan.resources if r["type"].startswith("pulumi:providers:")}


def resolve_provider(
    plan: Plan, resource: Mapping[str, Any], providers: Mapping[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """The provider resource a resource uses: its explicit reference (`<urn>::<id>`), else the default
    provider the CLI would create from stack config (region from the plan)."""
    ref = resource.get("provider")
    if isinstance(ref, str) and ref:
        for urn, p in providers.items():
            if ref == urn or ref.startswith(urn + "::"):
                return p
    pkg = resource["type"].split(":", 1)[0]
    if resource["type"].startswith("pulumi:providers:") or pkg not in ("aws", "gcp", "azure-native"):
        return None
    cloud = {"azure-native": "azure"}.get(pkg, pkg)
    if cloud != plan.cloud or not plan.region:
        return None
    key = "location" if cloud == "azure" else "region"
    return {
        "urn": f"urn:pulumi:{plan.stack}::{plan.project}::pulumi:providers:{pkg}::default",
        "type": f"pulumi:providers:{pkg}",
        "name": "default",
        "inputs": {key: plan.region},
    }


def to_resources(plan: Plan) -> list[Resource]:
    """The plan's resources as the pack sees them (provider resolved, unknowns as sentinels), for
    in-process evaluation in tests and for cross-checking the protocol path."""
    providers = provider_index(plan)
    out = []
    for r in plan.resources:
        prov = resolve_provider(plan, r, providers)
        out.append(
            Resource(
                type=r["type"],
                name=r["name"],
                urn=r["urn"],
                inputs=to_wire(r.get("inputs") or {}),
                provider_inputs=to_wire(prov.get("inputs") or {}) if prov else {},
                provider_type=prov["type"] if prov else "",
                parent=r.get("parent") or "",
                dependencies=tuple(d for d in r.get("dependencies") or [] if isinstance(d, str)),
            )
        )
    return out
