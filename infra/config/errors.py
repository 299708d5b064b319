"""One error type for bad config, and the translation of pydantic's errors into it.

Every message has the same shape, `<key path>: <value> is not allowed; <what is allowed>`, with the key
path as written in Pulumi.<stack>.yaml (camelCase, dotted) and, for cloud limits, the limit's source.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo


class ConfigError(ValueError):
    """A stack config value is missing, unknown or out of range; the message says how to fix it."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key}: {value!r} is not allowed; {allowed}")


def _field(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[type[BaseModel] | None, FieldInfo | None]:
    """Walk a pydantic error location (aliases and list indexes) to the model and field it names."""
    current: type[BaseModel] | None = model
    info: FieldInfo | None = None
    for part in loc:
        if current is None or isinstance(part, int):
            continue
        by_alias = {f.alias or n: f for n, f in current.model_fields.items()}
        info = by_alias.get(str(part))
        if info is None:
            return current, None
        candidates = (*typing.get_args(info.annotation), info.annotation)
        current = next((a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return current, info


def _allowed(model: type[BaseModel], error: Any) -> str:
    kind, loc, ctx = error["type"], tuple(error["loc"]), error.get("ctx") or {}
    if kind == "extra_forbidden":
        parent, _ = _field(model, loc[:-1])
        keys = sorted(f.alias or n for n, f in (parent or model).model_fields.items() if n != "stack")
        return f"unknown key; allowed keys: {', '.join(keys)}"
    if kind == "missing":
        return "this key is required"
    _, info = _field(model, loc)
    if kind == "literal_error":
        return f"allowed: {ctx.get('expected', '').replace(chr(39), '').replace(' or ', ', ')}"
    described = info.description if info is not None and info.description else ""
    if kind.startswith("int_"):
        return f"expected an integer{', ' + described if described else ''}"
    if kind.startswith(("float_", "finite_")):
        return f"expected a number{', ' + described if described else ''}"
    if kind.startswith("bool_"):
        return "expected true or false"
    if kind == "string_type":
        return 'expected a string (quote numbers such as "1.33" in YAML)'
    if kind in ("tuple_type", "list_type"):
        return f"expected a list{': ' + described if described else ''}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "expected an object"
    message = str(error.get("msg", kind)).removeprefix("Value error, ")
    return f"{message}; expected {described}" if described else message


def from_validation_error(model: type[BaseModel], err: ValidationError) -> ConfigError:
    """The first error pydantic found, as a ConfigError naming the key path, the value and the fix."""
    first = err.errors(include_url=False)[0]
    key = ".".join(str(p) for p in first["loc"] if not isinstance(p, int)) or "config"
    value = first.get("input") if first["type"] != "missing" else None
    return ConfigError(key, value, _allowed(model, first))
