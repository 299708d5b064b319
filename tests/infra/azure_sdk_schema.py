"""Azure's REST definitions as the azure-mgmt-* SDKs (generated from the REST specs) carry them, read the same
way from both generations of generated code:

- AutoRest/msrest models (compute, monitor, msi, authorization): `_attribute_map` (python name -> REST key,
  `properties.x` for flattened members, and a type string) and `_validation` (readonly, required, pattern,
  lengths, ranges, list sizes); path parameters' constraints in the request builders' `_SERIALIZER.url(...)`.
- TypeSpec models (storage, containerservice, keyvault, containerregistry, network, consumption,
  loganalytics, resource): `rest_field(name=..., visibility=[...])` and type annotations. They carry the REST
  names, readonly (visibility `read` only), required (not Optional) and the known enum values, but none of the
  spec's patterns or lengths: those are in the table (azure_api_table.PATH), cited from the REST specs.
"""

from __future__ import annotations

import ast
import datetime
import enum
import functools
import importlib
import inspect
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Member:
    """One REST member: its kind (str, int, float, bool, list, dict, model, any), element / model, enum values,
    readonly and required, and the spec's constraints where the SDK keeps them."""

    rest: str
    kind: str
    item: Member | None = None
    model: type | None = None
    enum: tuple[str, ...] = ()
    readonly: bool = False
    required: bool = False
    limits: dict[str, Any] = field(default_factory=dict)


def _enum_values(enum_cls: Any) -> tuple[str, ...]:
    return tuple(str(e.value) for e in enum_cls)


def _models_module(cls: type) -> types.ModuleType:
    return importlib.import_module(cls.__module__.rsplit(".", 1)[0])


# msrest ------------------------------------------------------------------------------------------------------

_MSREST_SCALARS = {"str": "str", "int": "int", "long": "int", "float": "float", "bool": "bool",
                   "iso-8601": "str", "duration": "str", "date": "str", "object": "any", "rfc-1123": "str"}  # fmt: skip


def _msrest_enum(cls: type, attr: str) -> tuple[str, ...]:
    """msrest types enums as `str`; the class docstring names the enum (`:vartype x: str or ~...models.Kind`)."""
    doc = inspect.getdoc(cls) or ""
    found = re.search(rf":vartype {attr}: (?:str|list\[str\]) or ~[\w.]+\.(\w+)", doc.replace("\n", " "))
    if not found:
        return ()
    enum_cls = getattr(_models_module(cls), found[1], None)
    return _enum_values(enum_cls) if isinstance(enum_cls, enum.EnumMeta) else ()


def _msrest_member(
    cls: type, rest: str, type_string: str, attr: str | None, checks: dict[str, Any]
) -> Member:
    limits = {k: v for k, v in checks.items() if k not in ("readonly", "required", "constant")}
    common: dict[str, Any] = {
        "readonly": bool(checks.get("readonly")),
        "required": bool(checks.get("required")),
        "limits": limits,
    }
    if type_string.startswith("[") and type_string.endswith("]"):
        item = _msrest_member(cls, rest, type_string[1:-1], None, {})
        if attr and item.kind == "str":
            item = Member(rest, "str", enum=_msrest_enum(cls, attr))
        return Member(rest, "list", item=item, **common)
    if type_string.startswith("{") and type_string.endswith("}"):
        return Member(rest, "dict", item=_msrest_member(cls, rest, type_string[1:-1], None, {}), **common)
    if type_string in _MSREST_SCALARS:
        kind = _MSREST_SCALARS[type_string]
        return Member(rest, kind, enum=_msrest_enum(cls, attr) if attr and kind == "str" else (), **common)
    return Member(rest, "model", model=getattr(_models_module(cls), type_string), **common)


# TypeSpec ----------------------------------------------------------------------------------------------------


def _typespec_member(rest: str, hint: Any, *, readonly: bool) -> Member:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    required = True
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        required, args = False, tuple(a for a in args if a is not type(None))
        hint = args[0] if len(args) == 1 else typing.Union[args]  # noqa: UP007 (rebuilding a runtime union)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    common: dict[str, Any] = {"readonly": readonly, "required": required and not readonly}
    if origin in (typing.Union, types.UnionType):
        enums = [a for a in args if isinstance(a, enum.EnumMeta)]
        if enums and str in args:
            return Member(rest, "str", enum=_enum_values(enums[0]), **common)
        return Member(rest, "any", **common)
    if origin is list:
        return Member(rest, "list", item=_typespec_member(rest, args[0], readonly=False), **common)
    if origin is dict:
        return Member(rest, "dict", item=_typespec_member(rest, args[1], readonly=False), **common)
    if isinstance(hint, enum.EnumMeta):
        return Member(rest, "str", enum=_enum_values(hint), **common)
    scalars = {str: "str", int: "int", float: "float", bool: "bool", datetime.datetime: "str",
               datetime.timedelta: "str", datetime.date: "str"}  # fmt: skip
    if hint in scalars:
        return Member(rest, scalars[hint], **common)
    if inspect.isclass(hint) and hasattr(hint, "_attr_to_rest_field") or _is_typespec(hint):
        return Member(rest, "model", model=hint, **common)
    return Member(rest, "any", **common)


def _is_typespec(cls: Any) -> bool:
    return inspect.isclass(cls) and any(type(v).__name__ == "_RestField" for v in _class_fields(cls).values())


def _class_fields(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        out.update({k: v for k, v in vars(base).items() if type(v).__name__ == "_RestField"})
    return out


# Both --------------------------------------------------------------------------------------------------------


@functools.cache
def members(cls: Any) -> dict[str, Member]:
    """REST name -> Member for a model class; flattened msrest members keep their `properties.` prefix."""
    out: dict[str, Member] = {}
    if hasattr(cls, "_attribute_map"):
        checks = getattr(cls, "_validation", {})
        for attr, spec in cls._attribute_map.items():
            if not spec["key"]:  # additional_properties
                continue
            rest = spec["key"].replace("\\.", "\0")
            out[rest] = _msrest_member(cls, rest, spec["type"], attr, checks.get(attr, {}))
        return out
    module = importlib.import_module(cls.__module__)
    namespace = {**vars(module), "_models": _models_module(cls)}
    hints = typing.get_type_hints(cls, globalns=namespace)
    for attr, rf in _class_fields(cls).items():
        rest = rf._rest_name_input or attr
        readonly = rf._visibility == ["read"]
        out[rest] = _typespec_member(rest, hints[attr], readonly=readonly)
        if rf._is_discriminator:
            out[rest] = Member(rest, "str", readonly=False, required=False)
    return out


def subtype(cls: Any, value: dict[str, Any], plan_key: Any) -> Any:
    """The polymorphic subtype a value's discriminator names (msrest `_subtype_map`, TypeSpec `__mapping__`)."""
    for attr, mapping in getattr(cls, "_subtype_map", {}).items():
        rest = cls._attribute_map[attr]["key"].replace("\\.", "\0")
        chosen = mapping.get(value.get(plan_key(rest), ""))
        found = getattr(_models_module(cls), chosen) if chosen else cls
        if found is not cls:
            return subtype(found, value, plan_key)
    mapping = getattr(cls, "__mapping__", None)
    if mapping:
        for rest, m in members(cls).items():
            sub = mapping.get(value.get(plan_key(rest), "")) if m.kind == "str" else None
            if sub is not None and sub is not cls:
                return subtype(sub, value, plan_key)
    return cls


@functools.cache
def url_parameters(operations_module: str) -> dict[str, dict[str, Any]]:
    """REST path parameter -> the constraints its request builders give `_SERIALIZER.url` (msrest SDKs)."""
    module = importlib.import_module(operations_module)
    out: dict[str, dict[str, Any]] = {}
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if (isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Call)
                    and getattr(value.func, "attr", "") == "url"):  # fmt: skip
                out[key.value] = {
                    str(k.arg): ast.literal_eval(k.value) for k in value.keywords if k.arg != "skip_quote"
                }
    return out
