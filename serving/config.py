"""Typed Triton model configuration, rendered to `config.pbtxt`.

Each dataclass mirrors one message of Triton's `model_config.proto` (only the fields
this platform uses) and validates itself, so a bad value fails at build time with a
message that says what to change, not at server start with a protobuf parse error.
`render()` writes protobuf text format; tests parse every rendered config back with
the `ModelConfig` protobuf shipped in tritonclient.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from serving.engine_config import OnnxRuntimeOptimization
from serving.errors import ConfigError
from serving.pbtxt import Enum, render

DataType = Literal["TYPE_STRING", "TYPE_INT64", "TYPE_INT32", "TYPE_FP32", "TYPE_FP16", "TYPE_BOOL"]
DATA_TYPES: frozenset[str] = frozenset(DataType.__args__)  # type: ignore[attr-defined]
# numpy dtype name as tritonclient / python backend see each Triton type.
NUMPY_DTYPE: dict[str, str] = {
    "TYPE_STRING": "object",
    "TYPE_INT64": "int64",
    "TYPE_INT32": "int32",
    "TYPE_FP32": "float32",
    "TYPE_FP16": "float16",
    "TYPE_BOOL": "bool",
}


def _check_name(name: str, what: str) -> None:
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"{what} name {name!r} must be non-empty letters, digits, '_' or '-'")


@dataclass(frozen=True, kw_only=True, slots=True)
class Tensor:
    """One input or output. `dims` exclude the batch dimension when max_batch_size > 0."""

    name: str
    data_type: DataType
    dims: tuple[int, ...]
    """-1 marks a variable-size dimension (e.g. sequence length: padding is per batch)."""
    optional: bool = False

    def __post_init__(self) -> None:
        _check_name(self.name, "tensor")
        if self.data_type not in DATA_TYPES:
            raise ConfigError(
                f"tensor {self.name}: data_type {self.data_type!r} is not one of {sorted(DATA_TYPES)}"
            )
        if not self.dims or any(d == 0 or d < -1 for d in self.dims):
            raise ConfigError(
                f"tensor {self.name}: dims {self.dims} must be a non-empty list of positive sizes or -1 (variable)"
            )

    def message(self) -> dict[str, object]:
        msg: dict[str, object] = {
            "name": self.name,
            "data_type": Enum(self.data_type),
            "dims": list(self.dims),
        }
        if self.optional:
            msg["optional"] = True
        return msg


@dataclass(frozen=True, kw_only=True, slots=True)
class DynamicBatching:
    """Server-side batching of concurrent requests into one model execution."""

    max_queue_delay_microseconds: int
    """How long the first request of a batch may wait for company; chosen by measurement (serving/README.md)."""
    preferred_batch_size: tuple[int, ...] = ()
    queue_timeout_microseconds: int = 0
    """Still queued after this: rejected, not run (0 = never); a request's `timeout` shortens it (only a nonzero
    default can be shortened). Triton runs queued requests whose client is gone: they pile up before live ones."""

    def __post_init__(self) -> None:
        if self.max_queue_delay_microseconds < 0:
            raise ConfigError("dynamic_batching.max_queue_delay_microseconds must be >= 0 (0 = no waiting)")
        if any(b < 1 for b in self.preferred_batch_size):
            raise ConfigError("dynamic_batching.preferred_batch_size entries must be >= 1")
        if self.queue_timeout_microseconds < 0:
            raise ConfigError("dynamic_batching.queue_timeout_microseconds must be >= 0 (0 = never)")

    def message(self) -> dict[str, object]:
        msg: dict[str, object] = {"max_queue_delay_microseconds": self.max_queue_delay_microseconds}
        if self.preferred_batch_size:
            msg["preferred_batch_size"] = list(self.preferred_batch_size)
        if self.queue_timeout_microseconds:
            msg["default_queue_policy"] = {
                "timeout_action": Enum("REJECT"),
                "default_timeout_microseconds": self.queue_timeout_microseconds,
                "allow_timeout_override": True,
            }
        return msg


@dataclass(frozen=True, kw_only=True, slots=True)
class InstanceGroup:
    count: int = 1
    kind: Literal["KIND_CPU", "KIND_GPU"] = "KIND_CPU"
    gpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ConfigError(f"instance_group.count must be >= 1, got {self.count}")
        if self.kind not in ("KIND_CPU", "KIND_GPU"):
            raise ConfigError(f"instance_group.kind must be KIND_CPU or KIND_GPU, got {self.kind!r}")
        if self.gpus and self.kind != "KIND_GPU":
            raise ConfigError("instance_group.gpus only applies to kind KIND_GPU")

    def message(self) -> dict[str, object]:
        msg: dict[str, object] = {"count": self.count, "kind": Enum(self.kind)}
        if self.gpus:
            msg["gpus"] = list(self.gpus)
        return msg


@dataclass(frozen=True, kw_only=True, slots=True)
class VersionPolicy:
    """`latest` keeps the newest N versions loaded; `specific` pins exact versions (a rollback)."""

    latest: int | None = 2
    specific: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if (self.latest is None) == (not self.specific):
            raise ConfigError("version policy: set exactly one of latest=N or specific=(versions...)")
        if self.latest is not None and self.latest < 1:
            raise ConfigError("version policy: latest must be >= 1")
        if any(v < 1 for v in self.specific):
            raise ConfigError("version policy: versions are positive integers")

    def message(self) -> dict[str, object]:
        if self.specific:
            return {"specific": {"versions": list(self.specific)}}
        return {"latest": {"num_versions": self.latest}}


@dataclass(frozen=True, kw_only=True, slots=True)
class WarmupInput:
    data_type: DataType
    dims: tuple[int, ...]
    """Concrete shape (no -1) without the batch dimension."""
    zero_data: bool = True

    def __post_init__(self) -> None:
        if any(d < 1 for d in self.dims):
            raise ConfigError(f"warmup input dims {self.dims} must be concrete positive sizes")


@dataclass(frozen=True, kw_only=True, slots=True)
class Warmup:
    """Requests Triton sends before marking the model ready, so the first user request is not the slow one."""

    name: str
    batch_size: int
    inputs: Mapping[str, WarmupInput]

    def message(self) -> dict[str, object]:
        return {
            "name": self.name,
            "batch_size": self.batch_size,
            "inputs": [
                {
                    "key": key,
                    "value": {
                        "data_type": Enum(w.data_type),
                        "dims": list(w.dims),
                        "zero_data": w.zero_data,
                    },
                }
                for key, w in self.inputs.items()
            ],
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class EnsembleStep:
    model_name: str
    input_map: Mapping[str, str]
    """step model's input name -> ensemble tensor name"""
    output_map: Mapping[str, str]
    model_version: int = -1
    """-1 = the newest loaded version, so a version pin on the step models is a rollback of the whole pipeline."""

    def message(self) -> dict[str, object]:
        return {
            "model_name": self.model_name,
            "model_version": self.model_version,
            "input_map": [{"key": k, "value": v} for k, v in self.input_map.items()],
            "output_map": [{"key": k, "value": v} for k, v in self.output_map.items()],
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelConfig:
    name: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    max_batch_size: int
    backend: str | None = None
    platform: str | None = None
    dynamic_batching: DynamicBatching | None = None
    instance_groups: tuple[InstanceGroup, ...] = ()
    version_policy: VersionPolicy | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)
    onnxruntime: OnnxRuntimeOptimization | None = None
    warmup: tuple[Warmup, ...] = ()
    ensemble_steps: tuple[EnsembleStep, ...] = ()

    def __post_init__(self) -> None:
        _check_name(self.name, "model")
        if (self.backend is None) == (self.platform is None):
            raise ConfigError(f"model {self.name}: set exactly one of backend= or platform=")
        if self.max_batch_size < 0:
            raise ConfigError(f"model {self.name}: max_batch_size must be >= 0 (0 disables batching)")
        if not self.inputs or not self.outputs:
            raise ConfigError(f"model {self.name}: needs at least one input and one output")
        names = [t.name for t in (*self.inputs, *self.outputs)]
        if len(set(names)) != len(names):
            raise ConfigError(f"model {self.name}: tensor names must be unique, got {names}")
        if self.dynamic_batching is not None:
            if self.max_batch_size == 0:
                raise ConfigError(f"model {self.name}: dynamic batching needs max_batch_size > 0")
            too_big = [b for b in self.dynamic_batching.preferred_batch_size if b > self.max_batch_size]
            if too_big:
                raise ConfigError(
                    f"model {self.name}: preferred_batch_size {too_big} exceeds max_batch_size {self.max_batch_size}"
                )
        if self.platform == "ensemble":
            if not self.ensemble_steps:
                raise ConfigError(f"model {self.name}: an ensemble needs ensemble_steps")
            if self.dynamic_batching or self.instance_groups:
                raise ConfigError(f"model {self.name}: ensembles take no dynamic_batching/instance_group")
        elif self.ensemble_steps:
            raise ConfigError(f"model {self.name}: ensemble_steps need platform='ensemble'")
        if self.onnxruntime is not None and self.platform != "onnxruntime_onnx" and self.backend != "python":
            raise ConfigError(
                f"model {self.name}: onnxruntime optimization needs platform='onnxruntime_onnx' "
                "(or backend='python', the local stand-in that reads the same block)"
            )
        for w in self.warmup:
            if w.batch_size > max(self.max_batch_size, 1):
                raise ConfigError(f"model {self.name}: warmup batch {w.batch_size} > max_batch_size")
            unknown = set(w.inputs) - {t.name for t in self.inputs}
            if unknown:
                raise ConfigError(f"model {self.name}: warmup names unknown inputs {sorted(unknown)}")

    def message(self) -> dict[str, object]:
        msg: dict[str, object] = {"name": self.name}
        if self.backend is not None:
            msg["backend"] = self.backend
        if self.platform is not None:
            msg["platform"] = self.platform
        msg["max_batch_size"] = self.max_batch_size
        if self.version_policy is not None:
            msg["version_policy"] = self.version_policy.message()
        msg["input"] = [t.message() for t in self.inputs]
        msg["output"] = [t.message() for t in self.outputs]
        if self.dynamic_batching is not None:
            msg["dynamic_batching"] = self.dynamic_batching.message()
        if self.instance_groups:
            msg["instance_group"] = [g.message() for g in self.instance_groups]
        if self.onnxruntime is not None and self.onnxruntime.message():
            msg["optimization"] = self.onnxruntime.message()
        if self.parameters:
            msg["parameters"] = [{"key": k, "value": {"string_value": v}} for k, v in self.parameters.items()]
        if self.warmup:
            msg["model_warmup"] = [w.message() for w in self.warmup]
        if self.ensemble_steps:
            msg["ensemble_scheduling"] = {"step": [s.message() for s in self.ensemble_steps]}
        return msg

    def render(self) -> str:
        return (
            "# Generated by `python -m serving build`; edit serving/repository.py, not this file.\n"
            + render(self.message(), 0)
        )
