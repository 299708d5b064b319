"""Device speed settings, kept in one place: TF32, bf16 autocast, torch.compile before DDP, fused AdamW,
pinned-memory batch loading, CPU threads.

GPU (the `gpu` preset): TF32 for float32 matmuls and cuDNN convolutions (Ampere and newer), bf16 autocast
(no loss scaling needed), the model compiled *before* DDP wraps it (PyTorch's documented order: DDP's
hooks stay outside the compiled graph, which then splits at bucket boundaries), AdamW's fused CUDA kernel,
and batches collated by DataLoader workers into pinned host memory so the copy to the GPU is asynchronous.

CPU: bf16 autocast only where the cores have native bf16 (AVX512-BF16 / AMX), otherwise fp32; intra-op
threads = the cores given to this process (torchrun splits them between local workers).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from training import environment as env
from training import features
from training.config import RunConfig


def cpu_has_native_bf16() -> bool:
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def configure(config: RunConfig, device: Any) -> dict[str, Any]:
    """Process-wide settings for this device; returns what was chosen (recorded in metrics.json)."""
    import torch

    chosen: dict[str, Any] = {"device": device.type}
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        tf32 = major >= 8  # TF32 tensor cores exist from Ampere (8.x) on
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        chosen["tf32"] = tf32
    else:
        local_procs = env.LOCAL_WORLD_SIZE.get() or 1
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        threads = config.cpu_threads or max(1, cores // local_procs)
        torch.set_num_threads(threads)
        chosen["threads"] = threads
    chosen["autocast"] = autocast_dtype(config, device)
    return chosen


def autocast_dtype(config: RunConfig, device: Any) -> str | None:
    """'bfloat16' when config.precision is bf16 and the device computes bf16 natively, else None (fp32)."""
    if config.precision != "bf16":
        return None
    if device.type == "cuda":
        return "bfloat16"
    return "bfloat16" if cpu_has_native_bf16() else None


def autocast_factory(config: RunConfig, device: Any) -> Callable[[], Any]:
    import torch

    if autocast_dtype(config, device) is None:
        return contextlib.nullcontext
    return lambda: torch.autocast(device.type, dtype=torch.bfloat16)


def wrap(raw_model: Any, config: RunConfig, dist: Any) -> Any:
    """torch.compile (CUDA, config.compile) first, then DDP around the compiled module."""
    import torch

    model = raw_model
    cuda = dist.device.type == "cuda"
    if config.compile and cuda:
        model = torch.compile(model)
    if dist.initialized:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[dist.local_rank] if cuda else None)
    return model


def optimizer(model: Any, config: RunConfig, cuda: bool) -> Any:  # noqa: ARG001 (kept for callers)
    """AdamW without decay on biases and LayerNorm; the fused kernel."""
    import torch

    decay: list[Any] = []
    no_decay: list[Any] = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "LayerNorm" in name or name.endswith(".bias") else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": config.optim.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    # The fused kernel exists on CUDA and CPU (and is what the HF Trainer uses by default on both): one
    # kernel over all parameters instead of a handful of foreach ops per group; the arithmetic is AdamW's.
    return torch.optim.AdamW(groups, lr=config.optim.lr, fused=True)


CONFIGURED = ("initial_lr", "weight_decay")
"""What this run's config sets in each optimizer param group (initial_lr: the peak, the schedule's base)."""


def configured(optimizer: Any) -> list[dict[str, Any]]:
    """Each param group's CONFIGURED values as this run's config made them (read before loading a checkpoint)."""
    return [{k: group[k] for k in CONFIGURED} for group in optimizer.param_groups]


def reconfigure(optimizer: Any, scheduler: Any, values: list[dict[str, Any]]) -> None:
    """Put this run's peak lr and weight decay back after a checkpoint's optimizer and scheduler states replaced
    them, and set the current lr where the (new) schedule puts the resumed step.

    Loading restores the saved param groups' lr/initial_lr/weight_decay and the scheduler's base_lrs, so a
    resume with another optim.lr (say, lower after a divergence) trained on at the old one, while trainer.json
    and MLflow recorded the new one.
    """
    for group, own in zip(optimizer.param_groups, values, strict=True):
        group.update(own)
    scheduler.base_lrs = [own["initial_lr"] for own in values]
    for group, base, factor in zip(
        optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas, strict=True
    ):
        group["lr"] = base * factor(scheduler.last_epoch)
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]


def schedule(warmup: int, total: int) -> Callable[[int], float]:
    """Linear warmup from 0, then linear decay to 0 (a LambdaLR factor)."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


class _Batches:
    """A map-style dataset whose item k is the collated batch k (DataLoader then pins and prefetches it)."""

    def __init__(self, encoded: features.Encoded, batches: list[list[int]], pad_id: int, pad_to: int | None):
        self.encoded, self.batches, self.pad_id, self.pad_to = encoded, batches, pad_id, pad_to

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, k: int) -> dict[str, Any]:
        return features.collate(self.encoded, self.batches[k], pad_id=self.pad_id, pad_to=self.pad_to)


def batch_loader(
    encoded: features.Encoded,
    batches: list[list[int]],
    start: int,
    *,
    pad_id: int,
    pad_to: int | None,
    device: Any,
) -> Iterator[dict[str, Any]]:
    """Batches ``start..`` of this epoch on ``device``, in order.

    On CUDA two DataLoader workers collate ahead into pinned memory and the host-to-device copy is
    non-blocking. On CPU the same DataLoader collates in the training process (no workers, no pinning):
    collation is microseconds of numpy, and worker processes would only compete with the intra-op threads
    for the same cores.
    """
    import torch
    from torch.utils.data import DataLoader

    cuda = device.type == "cuda"
    dataset: Any = _Batches(encoded, batches[start:], pad_id, pad_to)  # map-style by protocol, torch lazily
    loader = DataLoader(
        dataset,
        batch_size=None,  # items are whole batches already
        shuffle=False,
        num_workers=2 if cuda else 0,
        pin_memory=cuda,
        prefetch_factor=4 if cuda else None,
        # Its own generator: creating the iterator would otherwise draw a seed from the global RNG, and a
        # resumed run (one more iterator, mid-epoch) would get different dropout masks than an uninterrupted one.
        generator=torch.Generator(),
    )
    for batch in loader:
        yield {k: t.to(device, non_blocking=True) for k, t in batch.items()} if cuda else batch
