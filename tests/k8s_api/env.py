"""A container's `env` and `envFrom`: the API server's rules, and the keys the kubelet drops.

Ported from kubernetes/kubernetes `pkg/apis/core/validation/validation.go` (`ValidateEnv`, `validateEnvVarValueFrom`,
`ValidateEnvFrom`, `validateConfigMapEnvSource`, `validateSecretEnvSource`; the names through
`ValidateConfigMapName`/`ValidateSecretName`, i.e. apimachinery `NameIsDNSSubdomain(name, prefix=true)`), and
`pkg/kubelet/kubelet_pods.go` `makeEnvironmentVariables`: a key of an envFrom ConfigMap or Secret that is not an
environment variable name once prefixed is skipped (only an `InvalidEnvironmentVariableNames` event says so), and the
container starts without it. An `optional` that is not a boolean fails decoding (400) before validation, and an
unknown field fails kubectl's default strict field validation (a `key` in a secretRef is the usual slip: envFrom
takes the whole Secret).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from tests.k8s_api import names as n

ENV_FROM_SOURCES = ("configMapRef", "secretRef")
ENV_FROM_FIELDS = {"prefix", *ENV_FROM_SOURCES}
REF_FIELDS = {"name", "optional"}
# The kinds an envFrom source names, and the fields whose keys become variables (a Secret's stringData is merged
# into data by the API server; a ConfigMap's binaryData never reaches the environment).
REF_KINDS = {"configMapRef": ("ConfigMap", ("data",)), "secretRef": ("Secret", ("data", "stringData"))}


def env_errors(env: list[dict[str, Any]], path: str) -> list[str]:
    errors: list[str] = []
    for i, e in enumerate(env):
        at = f"{path}[{i}]"
        errors += [
            f"{at}.name: Invalid value: {e.get('name')!r}: {m}" for m in n.env_var_name(e.get("name", ""))
        ]
        source = e.get("valueFrom")
        if source is None:
            continue
        if e.get("value"):
            errors.append(f"{at}.valueFrom: Invalid value: may not be specified when `value` is not empty")
        if len(source) != 1:
            errors.append(
                f"{at}.valueFrom: Invalid value: may not have more than one field specified at a time"
            )
        for ref in ("secretKeyRef", "configMapKeyRef"):
            if ref in source:
                key, name = source[ref].get("key", ""), source[ref].get("name", "")
                errors += [f"{at}.valueFrom.{ref}.key: {m}" for m in n.config_map_key(key)]
                errors += [
                    f"{at}.valueFrom.{ref}.name: Invalid value: {name!r}: {m}"
                    for m in n.dns1123_subdomain(name)
                ]
    return errors


def env_from_errors(sources: list[dict[str, Any]], path: str) -> list[str]:
    """ValidateEnvFrom. The API server names the list, not the entry, for a missing or a second source: the entry's
    index is kept here so that the message says which one to fix."""
    errors: list[str] = []
    for i, source in enumerate(sources):
        at = f"{path}[{i}]"
        errors += [f"{at}.{f}: unknown field" for f in sorted(set(source) - ENV_FROM_FIELDS)]
        prefix = source.get("prefix") or ""
        errors += [
            f"{at}.prefix: Invalid value: {prefix!r}: {m}" for m in (n.env_var_name(prefix) if prefix else [])
        ]
        refs = [r for r in ENV_FROM_SOURCES if source.get(r) is not None]
        for ref in refs:
            errors += _ref_errors(source[ref], f"{at}.{ref}")
        if not refs:
            errors.append(f'{at}: Invalid value: "": must specify one of: `configMapRef` or `secretRef`')
        elif len(refs) > 1:
            errors.append(f'{at}: Invalid value: "": may not have more than one field specified at a time')
    return errors


def _ref_errors(ref: dict[str, Any], path: str) -> list[str]:
    errors = [f"{path}.{f}: unknown field" for f in sorted(set(ref) - REF_FIELDS)]
    if "optional" in ref and not isinstance(ref["optional"], bool):
        errors.append(
            f"{path}.optional: Invalid value: {ref['optional']!r}: must be a boolean (true or false)"
        )
    name = ref.get("name") or ""
    if not name:
        return [*errors, f"{path}.name: Required value"]
    return errors + [
        f"{path}.name: Invalid value: {name!r}: {m}" for m in n.dns1123_subdomain(_mask_trailing_dash(name))
    ]


def _mask_trailing_dash(name: str) -> str:
    """apimachinery maskTrailingDash: a name used as a prefix may end in '-' (the check replaces the last two
    characters with "a", exactly so)."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def skipped_keys(
    pods: Iterable[tuple[str, str, dict[str, Any]]], found: Iterable[dict[str, Any]]
) -> list[str]:
    """The kubelet's silent drop: for each (path, namespace, pod spec), every key of a ConfigMap or Secret among
    `found` (same namespace) that an envFrom of the pod takes and that is no environment variable name once
    prefixed. Sources not among `found` (made outside the repository) cannot be checked."""
    data = {(o.get("kind"), (o.get("metadata") or {}).get("namespace", ""), (o.get("metadata") or {}).get("name")): o
            for o in found}  # fmt: skip
    errors: list[str] = []
    for path, namespace, spec in pods:
        for c_path, source, ref in _env_from_refs(spec, path):
            kind, fields = REF_KINDS[ref]
            obj = data.get((kind, namespace, source[ref].get("name")))
            if obj is None:
                continue
            prefix = source.get("prefix") or ""
            keys = [k for f in fields if isinstance(obj.get(f), dict) and n.known(obj[f]) for k in obj[f]]
            bad = sorted({prefix + k for k in keys if n.env_var_name(prefix + k)})
            if bad:
                errors.append(f"{c_path}.{ref}: keys {bad} of {kind} {namespace}/{source[ref]['name']} are not "
                              "environment variable names: the kubelet skips them (InvalidEnvironmentVariableNames)")  # fmt: skip
    return errors


def _env_from_refs(spec: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any], str]]:
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            for j, source in enumerate(c.get("envFrom") or []):
                for ref in ENV_FROM_SOURCES:
                    if isinstance(source.get(ref), dict):
                        yield f"{path}.{group}[{i}].envFrom[{j}]", source, ref
