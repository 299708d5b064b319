"""Record which input paths the rules READ, per resource type, while they judge a plan.

Each resource's inputs (and its provider's) are handed to the rules as `Inputs`, a dict that knows the
type token and the path it sits at, and records every key a rule asks it for (`.get`, `[]`, `in`). The
rules' path accessor `core.get` (imported by name into every rule module, and used by `references` and the
modules' own `values_at`) is wrapped as well, so that a dotted path is recorded whole, also when a step of
it is absent from this plan: `get(r.inputs, "accessControlPolicy.grants")` on a bucket without the block is
still a read of `accessControlPolicy.grants`.

Not resource inputs, hence not recorded (and why):
- JSON documents parsed from a string input (IAM, bucket, key and repository policies, through
  `core.parse_json_document`): their keys (`Statement`, `Effect`, ...) belong to the AWS/GCP policy
  language, not to the provider's inputs. The parsed copy is a plain dict, whose reads go unseen.
- Anything a rule builds itself (a dict of the tags it gathered): not an input object.
Helm's `values` is a provider input typed `Mapping[str, Any]`: the schema accepts any path below it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from policies.rules import core

# (type token, path as a tuple of keys, "module.function" that read it)
Read = tuple[str, tuple[str, ...], str]

# Functions that probe a fixed list of keys on resources of SEVERAL types (each key where that type has it):
# a miss on one type is their normal answer. Their reads are held to a weaker test (policy_input_names):
# each key must be an input of at least one type the plans declare or the pack names or covers, which
# still catches a misspelt key. "[dict]" names the function's dict reads only (its `get` paths stay checked per type).
GENERIC_PROBES = {
    "policies.rules.location.declared_location": "residency reads `location`/`region`/`zone`, which ever the type has",
    "policies.rules.core.references [dict]": "matches a reference against whichever name inputs the target has",
    "policies.rules.data_flows._declared_names [dict]": "collects the names any declared resource may go by",
    "policies.rules.keys._names [dict]": "collects the names any declared key may go by",
    "policies.rules.data_lifecycle.log_buckets": "a bucket's name is `bucket` (AWS) or `name` (GCS, Azure)",
    "policies.rules.gpu._mentions_checkpoint": "any bucket/container type: its name and tags or labels",
    "policies.rules.gpu._check_pool": "one check for EKS, GKE and AKS pools: each cloud's spot field",
    "policies.rules.gpu.pools_of [dict]": "a cluster's own tags (AKS `tags`, GKE `resourceLabels`) for its inline pools",
    "policies.rules.public_access.gcp_members": "IAM member / binding / policy types: `member`, `members`, `policyData`",
    "policies.rules.public_access.check_gcp_members": "the same three keys, for unknown members",
    "policies.rules.public_access.check_gcp_members.<locals>.<listcomp>": "the same three keys, for unknowns",
    "policies.rules.cost.effective_tags": "any provider: AWS `defaultTags`, GCP `defaultLabels` (Azure has neither)",
}
_ORIGINAL_GET = core.get
_RECORDING: list[Read] | None = None


def _caller(depth: int) -> str:
    f = sys._getframe(depth + 1)
    return f"{f.f_globals.get('__name__', '?')}.{f.f_code.co_qualname}"


def _record(type_: str, path: tuple[str, ...], depth: int, via_get: bool) -> None:
    if _RECORDING is None:
        return
    where = _caller(depth + 1)
    if not via_get and f"{where} [dict]" in GENERIC_PROBES:
        where = f"{where} [dict]"
    if where.startswith("policies.rules."):
        _RECORDING.append((type_, path, where))


def _join(prefix: tuple[str, ...], key: str) -> tuple[str, ...]:
    return (*prefix, key)


class Inputs(dict[str, Any]):
    """A resource's inputs (or a nested block of them) that records each key a rule reads."""

    __slots__ = ("_type", "_prefix")

    def __init__(self, data: Mapping[str, Any], type_: str, prefix: tuple[str, ...] = ()) -> None:
        super().__init__({k: wrap(v, type_, _join(prefix, str(k))) for k, v in data.items()})
        self._type = type_
        self._prefix = prefix

    def _seen(self, key: Any) -> None:
        # core.get's own steps are recorded whole by the get wrapper (also the steps it never reaches).
        if isinstance(key, str) and sys._getframe(2).f_code is not _ORIGINAL_GET.__code__:
            _record(self._type, _join(self._prefix, key), 2, via_get=False)

    def get(self, key: Any, default: Any = None) -> Any:
        self._seen(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self._seen(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._seen(key)
        return super().__contains__(key)

    def __reduce__(self) -> Any:  # a deepcopy of the inputs is plain data again
        return (dict, (dict(self),))


def wrap(value: Any, type_: str, prefix: tuple[str, ...]) -> Any:
    if isinstance(value, Mapping):
        return Inputs(value, type_, prefix)
    if isinstance(value, list | tuple):
        return [wrap(v, type_, _join(prefix, str(i))) for i, v in enumerate(value)]
    return value


def plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in dict.items(value)} if isinstance(value, Inputs) else dict(value)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _recording_get(data: Any, path: str, default: Any = None) -> Any:
    if isinstance(data, Inputs):
        # core.get splits on dots: its path is those keys, whatever a map key may hold
        _record(data._type, (*data._prefix, *path.split(".")), 1, via_get=True)
    return _ORIGINAL_GET(data, path, default)


def _plain_document(value: Any) -> dict[str, Any] | None:
    # A policy given as an object (not a JSON string) is a document too: its keys are not inputs.
    return _ORIGINAL_PARSE(plain(value))


_ORIGINAL_PARSE = core.parse_json_document


def instrument(resources: Sequence[core.Resource]) -> list[core.Resource]:
    """The same resources, whose inputs record what is read of them."""
    return [
        dataclasses.replace(
            r,
            inputs=Inputs(r.inputs, r.type),
            provider_inputs=Inputs(r.provider_inputs, r.provider_type)
            if r.provider_type
            else r.provider_inputs,
        )
        for r in resources
    ]


def _rule_modules() -> list[Any]:
    import policies.rules  # noqa: F401  (loads every rule module)

    return [m for n, m in sys.modules.items() if n.startswith("policies.rules") and m is not None]


@contextlib.contextmanager
def recording() -> Iterator[list[Read]]:
    """Within the block, rule reads on `instrument`ed resources land in the yielded list."""
    global _RECORDING
    patched = []
    for m in _rule_modules():
        for name, new, old in (
            ("get", _recording_get, _ORIGINAL_GET),
            ("parse_json_document", _plain_document, _ORIGINAL_PARSE),
        ):
            if getattr(m, name, None) is old:
                setattr(m, name, new)
                patched.append((m, name, old))
    reads: list[Read] = []
    _RECORDING = reads
    try:
        yield reads
    finally:
        _RECORDING = None
        for m, name, old in patched:
            setattr(m, name, old)
