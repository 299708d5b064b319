"""What a checkpoint holds besides the checkpoint store's mechanics: saving and resuming the run's state.

``state.pt`` (rank 0): model, optimizer, scheduler, grad scaler. ``rank-<r>.pt``: that rank's RNG
states (python, numpy, torch, CUDA). ``trainer.json``: ``State`` (step, epoch, sampler position,
early-stopping state, history), world size, config and dataset manifest hash.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import random
import time
from typing import Any

import numpy as np

from training import accel, distributed, rerun
from training import checkpoint as ckpt
from training.config import RunConfig
from training.errors import ConfigError, DataError, StorageAccessDenied, StorageUnavailable
from training.resume_checks import check_batch_order, check_world_size, data_difference

log = logging.getLogger("training")


@dataclasses.dataclass(slots=True)
class State:
    """Everything besides tensors that a resumed run needs (trainer.json in a checkpoint)."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    """Micro-batches of this epoch already consumed: the sampler position."""
    best_value: float = float("-inf")
    best_step: int | None = None
    bad_evals: int = 0
    stopped_early: bool = False
    finished: bool = False
    samples_seen: int = 0
    train_seconds: float = 0.0
    wall_seconds: float = 0.0
    attempts: int = 0
    preemptions: int = 0
    """Times this run saved and exited 75 on a stop request (the Job's preemption-loop cap reads it)."""
    mlflow_run_id: str | None = None
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def torch_bytes(obj: Any) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def torch_load(data: bytes) -> Any:
    import torch

    # Our own checkpoints (RNG states hold numpy tuples): only load from a bucket you control.
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)


def rng_state(cuda: bool) -> dict[str, Any]:
    import torch

    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if cuda else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


RESCUE_DIR = "checkpoints-rescue"


def rescue_store(store: ckpt.Store, output: Any) -> ckpt.Store | None:
    """Local folder that keeps a checkpoint the object store refused (None when checkpoints are local)."""
    return None if store.local else ckpt.Store(str(output / RESCUE_DIR))


REQUIRED_FILES = ("state.pt", "trainer.json")
"""Rank 0's files: a checkpoint without them cannot be resumed, whatever else its manifest lists."""


def latest_resumable(store: ckpt.Store, corrupt: list[str] | None = None) -> ckpt.Loaded | None:
    """The newest complete checkpoint that holds REQUIRED_FILES; one whose manifest lacks them is skipped."""
    return ckpt.latest(store, required=REQUIRED_FILES, corrupt=corrupt)


def _drop_corrupt(store: ckpt.Store, corrupt: list[str], found: ckpt.Loaded | None) -> None:
    """Delete the checkpoints with a manifest that resume skipped (all newer than the one it takes): a file
    truncated, altered or missing, or no REQUIRED_FILES. They can never be resumed; pruning deletes them too.

    Before pruning used resume's own check, they counted as complete there and, being the newest steps, were
    the ones kept: this run's own saves were deleted as soon as written until it passed their step, so a
    preemption before that restarted from the same old point (or from scratch) every time.
    """
    for name in corrupt:
        if found is not None and name == found.name:
            continue  # rewritten whole just now by the upload of the local rescue copy
        log.warning(
            "deleting corrupt checkpoint %s/%s (it cannot be resumed; resuming from %s): kept, it would "
            "outrank this run's new checkpoints when old ones are pruned",
            store.uri,
            name,
            found.name if found else "nothing, a fresh start",
        )
        store.delete(name)


def _push_rescued(store: ckpt.Store, rescue: ckpt.Store, found: ckpt.Loaded | None) -> ckpt.Loaded | None:
    """Upload a checkpoint kept locally during a storage outage when it is newer than the store's newest."""
    kept = latest_resumable(rescue)
    if kept is None:
        return found
    if found is None or found.step < kept.step:
        log.warning("uploading %s, kept on local disk while %s was unavailable", kept.name, store.uri)
        recorded = {k: kept.manifest[k] for k in ("best_step",) if k in kept.manifest}  # prune_best reads it
        ckpt.write_checkpoint(
            store, kept.name, kept.files, meta={"step": kept.step, **recorded, "rescued": True}
        )
        found = ckpt.latest(store)
    else:
        # The outage hit after the upload (the pruning that follows it): the store already holds this
        # step or a newer one, so the local copy is redundant and would otherwise stay forever.
        log.info(
            "%s kept on local disk is not newer than %s/%s; removing the local copy",
            kept.name,
            store.uri,
            found.name,
        )
    for name in rescue.dirs(ckpt.STEP_PREFIX):
        rescue.delete(name)
    return found


def resume(
    store: ckpt.Store,
    config: RunConfig,
    dist: distributed.Dist,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    scaler: Any,
    manifest_sha: str,
    *,
    rescue: ckpt.Store | None = None,
    total_steps: int | None = None,
) -> State | None:
    """Load the newest complete checkpoint (None: none); ``total_steps``: for a finished run (training/rerun.py)."""
    corrupt: list[str] = []
    found = latest_resumable(store, corrupt) if dist.is_main else None  # rank 0 verifies every candidate file
    if dist.is_main and rescue is not None:
        found = _push_rescued(store, rescue, found)
    if dist.is_main:
        _drop_corrupt(store, corrupt, found)
    name = dist.broadcast_object(found.name if found else None)
    if name is None:
        log.info("no complete checkpoint under %s: starting fresh", store.uri)
        return None
    rank_file = f"rank-{dist.rank:05d}.pt"
    if found is None:
        verified = ckpt.verify(store, name, list(REQUIRED_FILES))
        if verified is None:
            raise RuntimeError(f"checkpoint {name} verified on rank 0 but not on rank {dist.rank}")
        files = verified[1]
        if store.exists(f"{name}/{rank_file}"):
            files.update((ckpt.verify(store, name, [rank_file]) or ({}, {}))[1])
    else:
        files = found.files
    trainer = json.loads(files["trainer.json"])
    check_world_size(trainer, f"{store.uri}/{name}", dist.world_size)
    more = total_steps is not None and rerun.trains_on(trainer, f"{store.uri}/{name}", config, total_steps)
    check_batch_order(trainer, f"{store.uri}/{name}", config)
    if trainer["dataset_manifest_sha256"] != manifest_sha:
        raise DataError(
            config.data.source,
            f"checkpoint {store.uri}/{name} was trained on dataset {trainer['dataset_manifest_sha256'][:12]}, "
            f"this run's data is {manifest_sha[:12]}{data_difference(trainer, config)}: use the same data or "
            "a new checkpoint.uri",
        )
    saved_cfg = trainer.get("config", {})
    current = {k: v for k, v in config.to_dict().items() if k != "checkpoint"}
    changed = sorted(
        k
        for k in current
        if k in saved_cfg and json.dumps(saved_cfg[k], default=str) != json.dumps(current[k], default=str)
    )
    if changed:
        log.warning("resuming with a config that differs from the checkpoint's in: %s", ", ".join(changed))
    tensors = torch_load(files["state.pt"])
    own = accel.configured(optimizer)
    try:
        model.load_state_dict(tensors["model"])
        optimizer.load_state_dict(tensors["optimizer"])
    except (RuntimeError, ValueError) as exc:  # torch: "size mismatch ..." / "... different number of params"
        raise ConfigError(
            "checkpoint.uri",
            f"checkpoint {store.uri}/{name} holds a model/optimizer of another shape than this config's "
            f"(config differs in: {', '.join(changed) or 'nothing recorded'}; torch: {(str(exc).splitlines() or [type(exc).__name__])[0]}). "
            "Resume with the checkpoint's model settings, or set a new checkpoint.uri to start fresh",
        ) from exc
    scheduler.load_state_dict(tensors["scheduler"])
    scaler.load_state_dict(tensors["scaler"])
    # A new optim.lr / weight_decay, or epochs / warmup that move the schedule: applied, as the warning says.
    if changed:
        accel.reconfigure(optimizer, scheduler, own)
    if rank_file in files and trainer.get("world_size") == dist.world_size:
        set_rng_state(torch_load(files[rank_file]))
    else:
        log.warning(
            "world size changed (%s -> %d): data order and RNG streams restart from the seed",
            trainer.get("world_size"),
            dist.world_size,
        )
    fields = {f.name for f in dataclasses.fields(State)}
    state = State(**{k: v for k, v in trainer["state"].items() if k in fields})
    if more:
        rerun.reopen(state)
    log.info(
        "resumed from %s/%s: step %d, epoch %d, batch %d",
        store.uri,
        name,
        state.step,
        state.epoch,
        state.batch_in_epoch,
    )
    return state


def kept_locally(exc: Exception, rescue: ckpt.Store, name: str) -> None:
    """Say where checkpoint `name` was kept after the object store failed (`exc`) to take it."""
    if isinstance(exc, StorageAccessDenied):
        exc.kept_at = f"{rescue.uri}/{name}"  # in the error itself: exit 2 is read as "nothing to resume"
    else:
        log.error("%s kept on local disk at %s/%s; rerun once the store is back", name, rescue.uri, name)


def save(
    store: ckpt.Store,
    config: RunConfig,
    dist: distributed.Dist,
    raw_model: Any,
    optimizer: Any,
    scheduler: Any,
    scaler: Any,
    state: State,
    manifest_sha: str,
    wall_start: float,
    *,
    rescue: ckpt.Store | None = None,
    solo: bool = False,
) -> float:
    """Write a full checkpoint (every rank calls this); returns the seconds it took.

    When the object store stays unavailable past the retries (StorageUnavailable, exit 69) or refuses it
    (StorageAccessDenied, exit 2), the checkpoint goes to ``rescue`` (local disk) instead and the error
    propagates; the next run uploads it first. ``solo``:
    this rank alone writes (no gather, no pruning), for a rescue save after a failure outside ``save``.
    """
    t0 = time.monotonic()
    saved = dataclasses.replace(state, wall_seconds=state.wall_seconds + (time.monotonic() - wall_start))
    files = {f"rank-{dist.rank:05d}.pt": torch_bytes(rng_state(dist.device.type == "cuda"))}
    if dist.is_main:
        files["state.pt"] = torch_bytes(
            {
                "model": raw_model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict(),
            }
        )
        files["trainer.json"] = json.dumps(
            {
                "state": dataclasses.asdict(saved),
                "world_size": dist.world_size,
                "dataset_manifest_sha256": manifest_sha,
                "config": config.to_dict(),
            },
            default=str,
        ).encode()
    name = ckpt.step_name(state.step)
    try:
        ckpt.write_checkpoint(
            store,
            name,
            files,
            gather=dist.all_gather_object if dist.initialized and not solo else None,
            meta={"step": state.step, "best_step": state.best_step},
            is_main=dist.is_main,
        )
        if dist.is_main and not solo:
            ckpt.prune(store, config.checkpoint.keep_last, required=REQUIRED_FILES)
            if state.best_step is not None:  # a best folder no kept checkpoint records any more
                ckpt.prune_best(store, state.best_step)
    except (StorageUnavailable, StorageAccessDenied) as exc:
        # A refusal mid-run (credentials expired or revoked after the start's write check) loses the same steps
        # as an outage does: both keep them. The refusal is exit 2, not 69: a retried pod is refused again.
        if rescue is not None and dist.is_main:
            # Rank 0's files only (peers may be gone, so no gather): enough to resume, exactly on one process.
            # Every local rank shares this folder; another rank's manifest would replace rank 0's.
            meta = {"step": state.step, "best_step": state.best_step}
            ckpt.write_checkpoint(rescue, name, files, meta=meta, is_main=True)
            kept_locally(exc, rescue, name)
        raise
    seconds = time.monotonic() - t0
    log.info("checkpoint %s/%s saved in %.2f s", store.uri, name, seconds)
    return seconds
