"""What a resume must refuse: a checkpoint whose data position, batch order, world size or store would make
the continued run train on other rows than the interrupted one, and a run the spot pool keeps reclaiming.

Each check raises the error its exit code belongs to (ConfigError: exit 2, PreemptionLimit: exit 3) with the
setting to change; training/state.py `resume` calls them before any weight is loaded.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from training import checkpoint as ckpt
from training import rerun
from training.config import RunConfig
from training.errors import ConfigError, PreemptionLimit

if TYPE_CHECKING:
    from training.state import State

log = logging.getLogger("training")


def data_difference(trainer: dict[str, Any], config: RunConfig) -> str:
    """Why the data differs, where the checkpoint's config says: class ids are positions in data.labels, so
    resuming with another list (order included) would silently swap or remap the classes the weights learnt."""
    saved = (trainer.get("config") or {}).get("data") or {}
    if "labels" in saved and list(saved["labels"]) != list(config.data.labels):
        return f" (data.labels {','.join(saved['labels'])} -> {','.join(config.data.labels)})"
    if saved and "split" not in saved and config.data.split != "shuffle":
        return " (the checkpoint predates the hash split: add data.split=shuffle to resume it)"
    return ""


def check_world_size(trainer: dict[str, Any], name: str, world_size: int) -> None:
    """Refuse a resume that would mis-position the data: a different world size in the middle of an epoch.

    Each rank's batches are its shard of the epoch's permutation, so the rows consumed by W ranks up to
    micro-batch b are not the first b batches of any rank under W' ranks. At an epoch boundary nothing is
    half consumed and the next epoch's order does not depend on the past: that resume is exact.
    """
    saved = int(trainer.get("world_size") or world_size)
    position = int(trainer["state"].get("batch_in_epoch", 0))
    if saved == world_size or position == 0:
        return
    raise ConfigError(
        "world size",
        f"checkpoint {name} was saved by {saved} processes in the middle of epoch "
        f"{trainer['state'].get('epoch', 0)} (micro-batch {position} of each rank's share); resuming with "
        f"{world_size} processes would skip or repeat rows. Resume with {saved} processes (torchrun "
        "--nnodes x --nproc_per_node), or start a new checkpoint.uri",
    )


BATCH_ORDER_KEYS = ("batch_size", "seed", "length_bucketing", "bucket_window", "data.max_length")
"""What decides an epoch's batches (training/features.py epoch_batches; max_length through bucketing's lengths)."""


def check_batch_order(trainer: dict[str, Any], name: str, config: RunConfig) -> None:
    """Refuse a mid-epoch resume whose config cuts the epoch into other batches.

    The checkpoint's position is a count of micro-batches under its own batch order: under another one the
    rows already trained on are not the first ones, and a position past the new epoch's last batch left the
    loop spinning forever without a step (a larger batch_size), deaf to SIGTERM. An epoch boundary is exact.
    """
    position = int(trainer["state"].get("batch_in_epoch", 0))
    saved, current = rerun.flat(trainer.get("config") or {}), rerun.flat(config.to_dict())
    changed = [k for k in BATCH_ORDER_KEYS if k in saved and k in current and saved[k] != current[k]]
    if position == 0 or not changed:
        return
    raise ConfigError(
        changed[0],
        f"checkpoint {name} stopped in the middle of epoch {trainer['state'].get('epoch', 0)} (micro-batch "
        f"{position}) with {', '.join(f'{k}={saved[k]}' for k in changed)}; this run has "
        f"{', '.join(f'{k}={current[k]}' for k in changed)}, which orders the epoch's rows differently, so "
        "resuming would skip or repeat rows. Resume with "
        f"{' '.join(f'{k}={saved[k]}' for k in changed)}, or start a new checkpoint.uri",
    )


def check_fresh_start(store: ckpt.Store) -> None:
    """checkpoint.resume=false needs an empty checkpoint.uri: another run's checkpoints there would be mixed with
    this run's. Pruning kept the higher (older run's) steps and deleted this run's as soon as they were saved,
    and this run's best-<n> replaced the other run's under the same name, which that run's trainer.json names."""
    existing = store.dirs(ckpt.STEP_PREFIX) + store.dirs(ckpt.BEST_PREFIX)
    if existing:
        raise ConfigError(
            "checkpoint.resume",
            f"is false, but {store.uri} already holds checkpoints ({', '.join(existing[-3:])}): this run's "
            "would be mixed with them and pruning would delete one run's. Give this run a new checkpoint.uri "
            "(or --output), delete the old checkpoints, or set checkpoint.resume=true to continue them",
        )


def check_preemption_cap(state: State) -> None:
    """Stop a preemption loop: refuse (exit 3) once the checkpoint records TRAINING_MAX_PREEMPTIONS exits 75."""
    from training.environment import TRAINING_MAX_PREEMPTIONS

    cap = int(TRAINING_MAX_PREEMPTIONS.get() or 0)
    if state.preemptions:
        log.info(
            "this run was preempted %d times so far (attempt %d; cap %s, TRAINING_MAX_PREEMPTIONS)",
            state.preemptions,
            state.attempts + 1,
            cap or "off",
        )
    if cap and state.preemptions >= cap:
        raise PreemptionLimit(
            f"the checkpoint records {state.preemptions} preemptions (exit 75), the cap is {cap} "
            "(TRAINING_MAX_PREEMPTIONS): the spot pool keeps reclaiming this run; raise the cap, use "
            "on-demand nodes, or checkpoint more often"
        )
