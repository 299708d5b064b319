"""The providers' own definition of a resource's inputs: type token -> wire names, from the Pulumi SDKs.

A rule reads inputs by literal camelCase paths (`get(r.inputs, "accessControlPolicy.grants")`), and the
fixtures that test it write the same paths; a name that is wrong in both passes every test while on a real
plan the key never appears. The provider SDKs in .venv are the offline source of truth for those names:
each package registers its type tokens (the `resource_modules` JSON in its `__init__.py`), each resource
class has an `<Name>Args` input type whose properties carry the wire name (`@pulumi.getter(name=...)`),
and nested inputs are typed `...Args` classes, lists and maps. Kubernetes objects resolve the same way,
through pulumi_kubernetes' Args (`apps.v1.DeploymentArgs` -> `DeploymentSpecArgs` -> ... `ContainerArgs`).

`unresolved(token, path)` says why a path (a tuple of keys, as a map key may hold dots:
`service.beta.kubernetes.io/...`) is not an input of that type (None when it is one).
Everything is cached: a type's Args are walked once per session.
"""

from __future__ import annotations

import collections.abc
import functools
import importlib
import importlib.util
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any

from pulumi import Output
from pulumi import _types as pulumi_types

from policies.rules.core import canonical_type

# The package of each type token prefix (and of `pulumi:providers:<pkg>`).
PACKAGES = {
    "aws": "pulumi_aws",
    "gcp": "pulumi_gcp",
    "azure-native": "pulumi_azure_native",
    "kubernetes": "pulumi_kubernetes",
    "random": "pulumi_random",
}
_REGISTRATION = re.compile(r'resource_modules="""(.*?)"""', re.S)

# Shapes: "any" (a value the provider types as Any/JSON: any path below it is fine), "scalar" (nothing below
# it), ("object", ArgsClass), ("list", shape), ("map", shape): what a step of a path may go into.
Shape = Any
ANY = "any"
SCALAR = "scalar"


class UnknownType(LookupError):
    """A type token that no installed provider SDK defines (an old name, a misspelt token)."""


@functools.cache
def registry(pkg_module: str) -> dict[str, tuple[str, str]]:
    """token -> (module fqn, class name), read from the package's own registration (no import of every module)."""
    spec = importlib.util.find_spec(pkg_module)
    if spec is None or spec.origin is None:
        raise UnknownType(f"provider SDK {pkg_module} is not installed in this virtualenv")
    m = _REGISTRATION.search(Path(spec.origin).read_text())
    assert m, f"{pkg_module}/__init__.py no longer registers resource_modules: update provider_schema.py"
    return {tok: (mod["fqn"], cls) for mod in json.loads(m.group(1)) for tok, cls in mod["classes"].items()}


@functools.cache
def args_class(token: str) -> type:
    """The input type of a resource token: `aws:s3/bucket:Bucket` -> pulumi_aws.s3.BucketArgs."""
    token = canonical_type(token)
    if token.startswith("pulumi:providers:"):
        pkg = token.rsplit(":", 1)[-1]
        if pkg not in PACKAGES:
            raise UnknownType(f"no provider SDK known for {token}")
        return importlib.import_module(PACKAGES[pkg]).ProviderArgs  # type: ignore[no-any-return]
    pkg = token.split(":", 1)[0]
    if pkg not in PACKAGES:
        raise UnknownType(f"{token} is no type of a provider SDK ({', '.join(PACKAGES)})")
    entry = registry(PACKAGES[pkg]).get(token)
    if entry is None:
        raise UnknownType(f"{PACKAGES[pkg]} defines no resource {token}")
    fqn, name = entry
    # The resource's own module: the package namespace may hold a nested input type of the same name
    # (pulumi_aws.s3.BucketVersioningArgs is Bucket's inline `versioning` block, from _inputs).
    resource_module = sys.modules[getattr(importlib.import_module(fqn), name).__module__]
    # pulumi_kubernetes names a resource's inputs `<Name>InitArgs` where `<Name>Args` is its object type.
    for candidate in (f"{name}InitArgs", f"{name}Args"):
        if hasattr(resource_module, candidate):
            return getattr(resource_module, candidate)  # type: ignore[no-any-return]
    raise UnknownType(f"{resource_module.__name__} defines no input type for {token}")


def _shapes(hint: Any) -> list[Shape]:
    """Every shape a (possibly Input/Optional/Union-wrapped) type hint admits."""
    origin = typing.get_origin(hint)
    if hint is Any or hint is object:
        return [ANY]
    if hint is type(None) or origin is Output or hint is Output:
        return []
    if origin in (collections.abc.Awaitable, typing.Awaitable):
        return []
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        return [s for a in typing.get_args(hint) for s in _shapes(a)]
    if origin in (collections.abc.Mapping, typing.Mapping, dict, typing.Dict, collections.abc.MutableMapping):  # noqa: UP006
        args = typing.get_args(hint)
        return [("map", _merge(_shapes(args[1]) if len(args) == 2 else [ANY]))]
    if origin in (collections.abc.Sequence, typing.Sequence, list, typing.List, tuple):  # noqa: UP006
        args = typing.get_args(hint)
        return [("list", _merge(_shapes(args[0]) if args else [ANY]))]
    if isinstance(hint, type) and pulumi_types.is_input_type(hint):
        return [("object", hint)]
    if hint in (dict, collections.abc.Mapping):
        return [("map", ANY)]
    if hint in (list, collections.abc.Sequence):
        return [("list", ANY)]
    return [SCALAR]


def _merge(shapes: list[Shape]) -> Shape:
    """One shape per list element / map value; a Union of several becomes a tuple of alternatives."""
    unique = list(dict.fromkeys(shapes))
    return unique[0] if len(unique) == 1 else ("union", tuple(unique))


@functools.cache
def properties(cls: type) -> dict[str, Shape]:
    """wire name -> shape of each input of an Args class (resolved once per class)."""
    return {name: _merge(_shapes(hint)) for name, hint in pulumi_types.input_type_types(cls).items()}


def _step(shape: Shape, key: str) -> tuple[list[Shape], str | None]:
    """Where one path step leads from `shape`: the shapes after it, or why the step is not an input."""
    if shape == ANY:
        return [ANY], None
    if shape == SCALAR:
        return [], f"a scalar has no '{key}'"
    kind = shape[0]
    if kind == "union":
        out = [s for alt in shape[1] for s in _step(alt, key)[0]]
        return out, None if out else f"no alternative of the value has '{key}'"
    if kind == "map":
        return [shape[1]], None
    if kind == "list":
        # Only an index steps into a list (core.get returns the default for any other key on a list).
        return ([shape[1]], None) if key.isdigit() else ([], f"'{key}' steps into a list (give an index)")
    props = properties(shape[1])
    if key in props:
        return [props[key]], None
    return [], f"{shape[1].__module__}.{shape[1].__qualname__} has no input '{key}'"


KeyPath = tuple[str, ...]


def dotted(path: KeyPath) -> str:
    return ".".join(path)


def unresolved(token: str, path: KeyPath) -> str | None:
    """None when `path` (wire names, digits for list indices) is an input of `token`; else why not."""
    try:
        shapes: list[Shape] = [("object", args_class(token))]
    except UnknownType as e:
        return str(e)
    walked: list[str] = []
    for key in path:
        reasons = []
        nxt: list[Shape] = []
        for s in shapes:
            found, why = _step(s, key)
            nxt += found
            if why:
                reasons.append(why)
        if not nxt:
            where = ".".join(walked) or "<inputs>"
            return f"{token}: '{dotted(path)}' is no provider input (at {where}: {'; '.join(dict.fromkeys(reasons))})"
        shapes = list(dict.fromkeys(nxt))
        walked.append(key)
    return None


def close_names(token: str, path: KeyPath) -> list[str]:
    """The provider's names at the level a path went wrong: what the fix probably is."""
    import difflib

    try:
        shapes: list[Shape] = [("object", args_class(token))]
    except UnknownType:
        return []
    for key in path:
        nxt: list[Shape] = [s for shape in shapes for s in _step(shape, key)[0]]
        if not nxt:
            names = [n for s in shapes if isinstance(s, tuple) and s[0] == "object" for n in properties(s[1])]
            return difflib.get_close_matches(key, names, n=3)
        shapes = nxt
    return []
