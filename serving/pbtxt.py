"""Protobuf text format for Triton's `config.pbtxt`: nested messages, repeated fields, bare enum values.

Written here rather than through the protobuf runtime so serving/config.py's dataclasses stay plain data;
tests parse every rendered config back with the `ModelConfig` protobuf shipped in tritonclient.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from serving.errors import ConfigError


class Enum(str):
    """A protobuf enum value: rendered bare (`KIND_CPU`), not quoted."""


def _scalar(value: object) -> str:
    if isinstance(value, Enum):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise ConfigError(f"cannot render {value!r} in protobuf text format")


def render(message: Mapping[str, object], depth: int) -> str:
    pad = "  " * depth
    lines: list[str] = []
    for key, value in message.items():
        if isinstance(value, Mapping):
            lines += [f"{pad}{key} {{", render(value, depth + 1).rstrip("\n"), f"{pad}}}"]
        elif isinstance(value, Sequence) and not isinstance(value, str):
            if value and all(isinstance(v, Mapping) for v in value):
                for item in value:
                    lines += [f"{pad}{key} {{", render(item, depth + 1).rstrip("\n"), f"{pad}}}"]  # type: ignore[arg-type]
            else:
                lines.append(f"{pad}{key}: [{', '.join(_scalar(v) for v in value)}]")
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}")
    return "\n".join(lines) + "\n"
