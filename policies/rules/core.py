"""The vocabulary every rule is written in, free of pulumi_policy.

Rules are pure functions over plain data (a resource's type token, its inputs with camelCase wire
names, its provider's inputs) so that they run unchanged in three places: inside the CrossGuard pack
(policies/.venv, wrapped by policies/pack.py), in unit tests and in the report (the project .venv,
which cannot import pulumi_policy because of its protobuf 5 pin).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# The engine's sentinels for values a preview cannot know yet (the same strings as
# pulumi_policy.proxy and the Pulumi engine's resource/properties.go). A rule never
# treats one as compliant or non-compliant: it reports what it could not decide as
# `undetermined(...)` (the pack and the offline gate decide what that means; see README).
UNKNOWN_SENTINELS = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # bool
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
        "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
        "e48ece36-62e2-4504-bad9-02848725956a",  # archive
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
    }
)
UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

Severity = Literal["low", "medium", "high", "critical"]
Enforcement = Literal["advisory", "mandatory", "disabled"]
Kind = Literal["resource", "stack"]


class Unknown:
    """Marker returned by `get` when a value on the path is not known at preview time."""

    def __repr__(self) -> str:
        return "<unknown>"


UNKNOWN = Unknown()


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN or (isinstance(value, str) and value in UNKNOWN_SENTINELS)


def get(data: Any, path: str, default: Any = None) -> Any:
    """`get(inputs, "scalingConfig.minSize")`: walk dotted keys; UNKNOWN if any step is unknown."""
    cur = data
    for key in path.split("."):
        if is_unknown(cur):
            return UNKNOWN
        if isinstance(cur, Mapping):
            if key not in cur:
                return default
            cur = cur[key]
        elif isinstance(cur, Sequence) and not isinstance(cur, str) and key.isdigit():
            idx = int(key)
            if idx >= len(cur):
                return default
            cur = cur[idx]
        else:
            return default
    return UNKNOWN if is_unknown(cur) else cur


def as_list(value: Any) -> list[Any]:
    if value is None or is_unknown(value):
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def truthy(value: Any) -> bool:
    """Provider inputs carry booleans as bools, sometimes as "true" strings (launch templates)."""
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value) and not is_unknown(value)


def as_number(value: Any) -> float | None:
    if value is None or is_unknown(value) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def parse_json_document(value: Any) -> dict[str, Any] | None:
    """IAM/bucket/key policies arrive as JSON strings (or already as objects)."""
    if value is None or is_unknown(value):
        return None
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        try:
            doc = json.loads(value)
        except json.JSONDecodeError:
            return None
        return doc if isinstance(doc, dict) else None
    return None


def contains_unknown(value: Any) -> bool:
    if is_unknown(value):
        return True
    if isinstance(value, Mapping):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(contains_unknown(v) for v in value)
    return False


@dataclass(frozen=True)
class Resource:
    """One resource as a policy sees it: what the engine sends in AnalyzeRequest/AnalyzerResource."""

    type: str
    name: str
    urn: str
    inputs: Mapping[str, Any]
    provider_inputs: Mapping[str, Any] = field(default_factory=dict)
    provider_type: str = ""
    parent: str = ""
    dependencies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Rules compare type tokens; variants of a token (API versions, S3 V2) mean the same kind.
        object.__setattr__(self, "type", canonical_type(self.type))

    @property
    def cloud(self) -> str:
        """aws | gcp | azure | kubernetes | pulumi | other (from the type token's package)."""
        if self.type.startswith("pulumi:providers:"):
            pkg = self.type.rsplit(":", 1)[-1]
        else:
            pkg = self.type.split(":", 1)[0]
        return {"azure-native": "azure"}.get(pkg, pkg if pkg in {"aws", "gcp", "kubernetes"} else "other")

    @property
    def is_provider(self) -> bool:
        return self.type.startswith("pulumi:providers:")


@dataclass(frozen=True)
class Context:
    """What a rule may read besides the resource: pack config and the stack's environment."""

    config: Mapping[str, Any] = field(default_factory=dict)
    environment: str | None = None

    def setting(self, key: str, default: Any) -> Any:
        value = self.config.get(key)
        return default if value is None else value


UNDETERMINED_PREFIX = "undetermined: "


class Undetermined(str):
    """A message for a check the rule could not decide (a value unknown at preview). It travels as an
    ordinary diagnostic whose text starts with UNDETERMINED_PREFIX, so the offline runner can tell it
    apart on the other side of the Analyzer protocol."""


def undetermined(what: str) -> Undetermined:
    """`yield undetermined("kmsKeyId is unknown at preview and depends on no key of this stack")`."""
    return Undetermined(UNDETERMINED_PREFIX + what)


def is_undetermined(message: str) -> bool:
    return message.startswith(UNDETERMINED_PREFIX)


@dataclass(frozen=True)
class Finding:
    """A violation (or an undetermined check) as a rule returns it; the pack turns it into a diagnostic."""

    message: str
    urn: str | None = None

    @property
    def undetermined(self) -> bool:
        return is_undetermined(self.message)


ResourceValidator = Callable[[Resource, Context], Iterable[str]]
StackValidator = Callable[[Sequence[Resource], Context], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A rule's metadata plus its pure validator; policies/pack.py turns it into a CrossGuard policy."""

    name: str
    description: str
    kind: Kind
    severity: Severity
    enforcement: Enforcement
    remediation: str
    url: str
    validate: Callable[..., Iterable[Any]]
    applies_to: Callable[[str], bool]
    config_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name != self.name.lower() or " " in self.name or "_" in self.name:
            raise ValueError(f"rule name {self.name!r} must be kebab-case (e.g. 'eu-data-residency')")
        if self.kind not in ("resource", "stack"):
            raise ValueError(f"rule {self.name}: kind must be 'resource' or 'stack', not {self.kind!r}")
        if not self.remediation or not self.url.startswith("https://"):
            raise ValueError(f"rule {self.name}: give remediation steps and an https:// documentation url")

    def covers(self, resource_type: str) -> bool:
        """The type guard, on the canonical token (versioned azure-native and S3 V2 tokens included)."""
        return self.applies_to(canonical_type(resource_type))

    def check_resource(self, resource: Resource, ctx: Context) -> list[str]:
        if self.kind != "resource" or not self.covers(resource.type):
            return []
        return list(self.validate(resource, ctx))

    def check_stack(self, resources: Sequence[Resource], ctx: Context) -> list[Finding]:
        if self.kind != "stack":
            return []
        return list(self.validate(resources, ctx))


_AZURE_VERSIONED = re.compile(r"^(azure-native:[^:/]+)/v\d[0-9a-z]*:")
_AWS_V2 = re.compile(r"^aws:s3/(bucket\w*)V2:(Bucket\w*)V2$")


def canonical_type(resource_type: str) -> str:
    """One token per resource kind, so a rule written for the default token also sees its variants:
    azure-native's explicit API versions (`azure-native:storage/v20230101:StorageAccount`) and
    pulumi-aws's V2 S3 resources (`aws:s3/bucketV2:BucketV2`, `...VersioningV2`), which pulumi-aws 7
    renamed to the plain tokens (the V2 names remain as aliases)."""
    m = _AZURE_VERSIONED.match(resource_type)
    if m:
        return m.group(1) + resource_type[m.end() - 1 :]
    m = _AWS_V2.match(resource_type)
    if m:
        return f"aws:s3/{m.group(1)}:{m.group(2)}"
    return resource_type


def is_diagnostic_setting(resource_type: str) -> bool:
    """azure-native v3 moved DiagnosticSetting from `insights` to `monitor`; both tokens exist in the wild."""
    return resource_type in (
        "azure-native:insights:DiagnosticSetting",
        "azure-native:monitor:DiagnosticSetting",
    )


def types(*patterns: str) -> Callable[[str], bool]:
    """The early guard on resource type: exact tokens or fnmatch patterns (`aws:iam/*`)."""
    exact = frozenset(p for p in patterns if not any(c in p for c in "*?["))
    globs = tuple(p for p in patterns if p not in exact)

    def match(resource_type: str) -> bool:
        return resource_type in exact or any(fnmatch.fnmatchcase(resource_type, g) for g in globs)

    return match


def of_type(resources: Iterable[Resource], guard: Callable[[str], bool]) -> Iterator[Resource]:
    return (r for r in resources if guard(r.type))


def references(resource: Resource, target: Resource, *keys: str) -> bool:
    """Whether `resource` points at `target`: by dependency edge, or by an input equal to the
    target's name/id (bucket name, account name, ...). Unknown values never match."""
    if target.urn in resource.dependencies:
        return True
    names = {target.name}
    for k in ("bucket", "name", "accountName", "id", "registryName", "resourceName"):
        v = target.inputs.get(k)
        if isinstance(v, str) and not is_unknown(v):
            names.add(v)
    for key in keys:
        v = get(resource.inputs, key)
        # A plain name, or an ARM id / self link whose path names the target (".../storageAccounts/<name>/...").
        if isinstance(v, str) and not is_unknown(v) and (v in names or names & set(v.split("/"))):
            return True
    return False
