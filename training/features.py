"""Tokenization (cached on local disk) and batching: dynamic padding, length bucketing, sharding.

The token cache is keyed by the dataset manifest hash, the tokenizer's own hash and the
maximum length, so epochs after the first and repeated runs never re-tokenize (nor touch
the bucket the data came from).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from training.data import SPLITS, Dataset, cache_root


@dataclass(frozen=True, slots=True)
class Encoded:
    """Token ids of one split, unpadded: row i is ids[offsets[i]:offsets[i+1]]."""

    ids: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def row(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i] : self.offsets[i + 1]]


def tokenizer_sha256(tokenizer: Any) -> str:
    """Hash of the full tokenizer definition (vocabulary, normalizer, special tokens)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return hashlib.sha256(repr(sorted(tokenizer.get_vocab().items())).encode()).hexdigest()
    spec = json.loads(backend.to_str())
    # Calling the tokenizer rewrites its truncation/padding state: not part of its identity.
    spec.pop("truncation", None)
    spec.pop("padding", None)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


ENCODE_CHUNK = 8192
"""Texts per tokenizer call. One call over a whole split returned every row as Python lists of ints (ids, attention
mask, token type ids: ~15 GB for a million short texts) before a single array was built."""


def encode(tokenizer: Any, texts: list[str], labels: list[int], max_length: int) -> Encoded:
    """Ids of each text, tokenized ENCODE_CHUNK texts at a time (each text's ids do not depend on its batch)."""
    id_parts: list[np.ndarray] = [np.zeros(0, dtype=np.int32)]
    length_parts: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    for start in range(0, len(texts), ENCODE_CHUNK):
        out = tokenizer(
            texts[start : start + ENCODE_CHUNK], truncation=True, max_length=max_length, padding=False,
            return_attention_mask=False, return_token_type_ids=False,
        )["input_ids"]  # fmt: skip
        lengths = np.fromiter((len(x) for x in out), dtype=np.int64, count=len(out))
        length_parts.append(lengths)
        id_parts.append(
            np.fromiter((t for row in out for t in row), dtype=np.int32, count=int(lengths.sum()))
        )
    lengths = np.concatenate(length_parts)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return Encoded(np.concatenate(id_parts), offsets, np.asarray(labels, dtype=np.int64))


def encode_dataset(
    tokenizer: Any, dataset: Dataset, max_length: int, *, use_cache: bool = True
) -> tuple[dict[str, Encoded], str]:
    """All splits, tokenized; returns (encoded splits, 'hit' or 'miss')."""
    key = hashlib.sha256(
        f"{dataset.manifest['sha256']}|{tokenizer_sha256(tokenizer)}|{max_length}|v1".encode()
    ).hexdigest()[:32]
    path = cache_root() / "tokens" / f"{key}.npz"
    if use_cache and path.is_file():
        try:
            with np.load(path) as z:
                return {s: Encoded(z[f"{s}_ids"], z[f"{s}_offsets"], z[f"{s}_labels"]) for s in SPLITS}, "hit"
        except (OSError, ValueError, KeyError):
            pass  # rebuilt below
    encoded = {
        s: encode(tokenizer, dataset.splits[s].texts, dataset.splits[s].labels, max_length) for s in SPLITS
    }
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
        arrays = {f"{s}_{k}": getattr(e, k) for s, e in encoded.items() for k in ("ids", "offsets", "labels")}
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    return encoded, "miss"


def epoch_batches(
    n: int,
    batch_size: int,
    *,
    epoch: int,
    seed: int,
    rank: int = 0,
    world_size: int = 1,
    lengths: np.ndarray | None = None,
    window_batches: int = 50,
) -> list[list[int]]:
    """This rank's batches of row indices for one epoch.

    Order comes from torch's DistributedSampler seeded with (seed, epoch), so every rank
    agrees on the permutation and takes its own share; with ``lengths`` the shuffled order
    is cut into windows of ``window_batches`` batches, each sorted by length, and the resulting batches
    are shuffled again with the same generator (bucketing without a fixed batch order).
    """
    import torch
    from torch.utils.data import DistributedSampler

    rows: Any = range(n)  # DistributedSampler only needs len()
    sampler: DistributedSampler[int] = DistributedSampler(
        rows, num_replicas=world_size, rank=rank, shuffle=True, seed=seed
    )
    sampler.set_epoch(epoch)
    order = list(sampler)
    if lengths is not None:
        window = batch_size * window_batches
        chunks = [order[i : i + window] for i in range(0, len(order), window)]
        order = [i for chunk in chunks for i in sorted(chunk, key=lambda j: int(lengths[j]))]
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if lengths is not None:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        batches = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
    return batches


def collate(
    encoded: Encoded, indices: list[int], *, pad_id: int, pad_to: int | None = None
) -> dict[str, Any]:
    """Right-padded input_ids/attention_mask/labels tensors; pad to the batch's longest row unless pad_to."""
    import torch

    rows = [encoded.row(i) for i in indices]
    width = pad_to or max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for j, r in enumerate(rows):
        ids[j, : len(r)] = r
        mask[j, : len(r)] = 1
    return {
        "input_ids": torch.from_numpy(ids),
        "attention_mask": torch.from_numpy(mask),
        "labels": torch.from_numpy(encoded.labels[indices]),
    }


def eval_batches(
    n: int, batch_size: int, *, rank: int = 0, world_size: int = 1, lengths: np.ndarray | None = None
) -> Iterator[list[int]]:
    """This rank's contiguous share of an evaluation set, in batches sorted by length (less padding)."""
    mine = list(range(rank, n, world_size))
    if lengths is not None:
        mine.sort(key=lambda i: int(lengths[i]))
    for i in range(0, len(mine), batch_size):
        yield mine[i : i + batch_size]
