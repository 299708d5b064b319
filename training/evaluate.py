"""Scoring a model on encoded splits (sharded across ranks), and the `evaluate` command."""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from training import features
from training.distributed import Dist

log = logging.getLogger("training")


def predict(
    model: Any, encoded: features.Encoded, *, batch_size: int, pad_id: int, dist: Dist, autocast: Any = None
) -> np.ndarray:
    """Class probabilities for every row, in row order, shape (rows, classes) (each rank scores its share)."""
    import torch

    model.eval()
    mine: list[tuple[list[int], list[list[float]]]] = []
    with torch.inference_mode():
        for idx in features.eval_batches(
            len(encoded), batch_size, rank=dist.rank, world_size=dist.world_size, lengths=encoded.lengths()
        ):
            batch = features.collate(encoded, idx, pad_id=pad_id)
            with autocast() if autocast else contextlib.nullcontext():
                logits = model(
                    input_ids=batch["input_ids"].to(dist.device),
                    attention_mask=batch["attention_mask"].to(dist.device),
                ).logits
            probs = torch.softmax(logits.float(), dim=-1).cpu().tolist()
            mine.append((idx, probs))
    out = np.full((len(encoded), int(model.config.num_labels)), np.nan)
    for part in dist.all_gather_object(mine):
        for idx, probs in part:
            out[idx] = probs
    return out


def validate(
    config: Any,
    dist: Dist,
    raw_model: Any,
    encoded: dict[str, features.Encoded],
    pad_id: int,
    autocast: Any,
    store: Any,
    state: Any,
    tracker: Any,
) -> dict[str, float]:
    """Score the validation split; on improvement record the step as best and write ``best-<step>/``."""
    from training import checkpoint as ckpt
    from training import metrics
    from training.state import torch_bytes

    val = encoded["validation"]
    probs = predict(
        raw_model, val, batch_size=config.eval_batch_size, pad_id=pad_id, dist=dist, autocast=autocast
    )
    scores = metrics.scores(val.labels, probs)
    value = scores[config.early_stopping_metric]
    improved = value > state.best_value
    if improved:
        state.best_value, state.best_step, state.bad_evals = value, state.step, 0
        if dist.is_main:
            ckpt.write_checkpoint(
                store,
                ckpt.step_name(state.step, ckpt.BEST_PREFIX),
                {"model.pt": torch_bytes(raw_model.state_dict())},
                meta={"step": state.step, **scores},
            )
            ckpt.prune_best(store, state.step)
    else:
        state.bad_evals += 1
    row = {"step": state.step, "epoch": state.epoch, **{f"val_{k}": v for k, v in scores.items()}}
    state.history.append(row)
    tracker.metrics({f"val_{k}": v for k, v in scores.items()}, state.step)
    log.info(
        "validation at step %d: accuracy %.4f f1 %.4f auc %.4f%s",
        state.step,
        scores["accuracy"],
        scores["f1"],
        scores["auc"],
        " (best so far)" if improved else f" ({state.bad_evals} without improvement)",
    )
    return scores


def evaluate_folder(
    model_dir: str, data_source: str | None, preset: str, overrides: list[str], out: str | None
) -> dict[str, Any]:
    """Score a saved model folder on the test split that the given preset/overrides define."""
    import torch

    from training import data, metrics, presets
    from training.config import apply_overrides
    from training.errors import ConfigError
    from training.model import load_saved, with_model_labels

    config = with_model_labels(apply_overrides(presets.get(preset), overrides), model_dir, overrides)
    if data_source:
        config = apply_overrides(config, {"data.source": data_source})
    tokenizer, model = load_saved(model_dir, lambda message: ConfigError("--model", message))
    dataset = data.load(config.data)
    encoded, _ = features.encode_dataset(tokenizer, dataset, config.data.max_length)
    dist = Dist(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))
    result: dict[str, Any] = {"model": model_dir, "dataset_manifest_sha256": dataset.manifest["sha256"]}
    for split in ("validation", "test"):
        probs = predict(
            model,
            encoded[split],
            batch_size=config.eval_batch_size,
            pad_id=tokenizer.pad_token_id or 0,
            dist=dist,
        )
        result[split] = metrics.scores(encoded[split].labels, probs)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result
