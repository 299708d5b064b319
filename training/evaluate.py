"""Scoring a model on encoded splits (sharded across ranks), and the `evaluate` command."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from training import features
from training.distributed import Dist


def predict(
    model: Any, encoded: features.Encoded, *, batch_size: int, pad_id: int, dist: Dist, autocast: Any = None
) -> np.ndarray:
    """Positive-class probabilities for every row, in row order (each rank scores its share)."""
    import torch

    model.eval()
    mine: list[tuple[list[int], list[float]]] = []
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
            probs = torch.softmax(logits.float(), dim=-1)[:, 1].cpu().tolist()
            mine.append((idx, probs))
    out = np.full(len(encoded), np.nan)
    for part in dist.all_gather_object(mine):
        for idx, probs in part:
            out[idx] = probs
    return out


def evaluate_folder(
    model_dir: str, data_source: str | None, preset: str, overrides: list[str], out: str | None
) -> dict[str, Any]:
    """Score a saved model folder on the test split that the given preset/overrides define."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from training import data, metrics, presets
    from training.config import apply_overrides

    config = apply_overrides(presets.get(preset), overrides)
    if data_source:
        config = apply_overrides(config, {"data.source": data_source})
    dataset = data.load(config.data)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
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
