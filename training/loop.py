"""One training attempt's optimisation loop: epochs of accumulated micro-batches, logging, validation, stops
(early stopping, a caller's hook or deadline, preemption) and checkpoints. Called by training/trainer.py, which
owns what comes before (data, model, resume) and after (best model, metrics, artifacts)."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from monitoring import progress as training_progress
from training import accel, distributed, features, preemption
from training import checkpoint as ckpt
from training import state as state_mod
from training.config import RunConfig
from training.errors import Preempted, StorageAccessDenied, StorageUnavailable
from training.evaluate import validate
from training.state import State
from training.tracking import Tracker

log = logging.getLogger("training")


@dataclass(slots=True)
class Hooks:
    """Optional control from a caller that runs the trainer in-process (hyperparameter search, training/tune.py)."""

    on_evaluate: Callable[[int, dict[str, float]], bool] | None = None
    """Called on rank 0 after each validation with (step, validation scores); True ends the run there, cleanly
    and cheaply: no final checkpoint, test scoring, baselines or model folder (report.finish_stopped)."""
    deadline: float | None = None
    """time.monotonic() after which the loop ends cleanly (checkpoint saved, then the usual final metrics)."""
    stopped: str | None = None
    """Set by the loop: 'hook' or 'deadline' when one of the above ended the run."""


def run_loop(
    config: RunConfig,
    dist: distributed.Dist,
    model: Any,
    raw_model: Any,
    optimizer: Any,
    scheduler: Any,
    scaler: Any,
    autocast: Any,
    encoded: dict[str, features.Encoded],
    pad_id: int,
    store: ckpt.Store,
    state: State,
    stop: preemption.StopRequest,
    tracker: Tracker,
    save_times: list[float],
    total_steps: int,
    wall_start: float,
    manifest_sha: str,
    hooks: Hooks,
    rescue: ckpt.Store | None,
) -> None:
    import torch
    from tqdm import tqdm

    train = encoded["train"]
    accum = config.optim.grad_accum_steps
    lengths = train.lengths() if config.length_bucketing else None
    pad_to = None if config.dynamic_padding else config.data.max_length
    last_save = time.monotonic()
    progress = tqdm(
        total=total_steps,
        initial=state.step,
        disable=not dist.is_main,
        desc="train",
        unit="step",
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=1.0,
    )
    window_samples, window_time, window_loss = 0, 0.0, []
    loss_sum: Any = 0.0
    done = state.step >= total_steps
    while not done and state.epoch < config.epochs:
        batches = features.epoch_batches(
            len(train),
            config.batch_size,
            epoch=state.epoch,
            seed=config.seed,
            rank=dist.rank,
            world_size=dist.world_size,
            lengths=lengths,
            window_batches=config.bucket_window,
        )
        loader = accel.batch_loader(
            train, batches, state.batch_in_epoch, pad_id=pad_id, pad_to=pad_to, device=dist.device
        )
        for start in range(state.batch_in_epoch, len(batches), accum):
            group = batches[start : start + accum]
            t0 = time.perf_counter()
            model.train()
            for k in range(len(group)):
                batch = next(loader)
                last = k == len(group) - 1
                sync = contextlib.nullcontext() if (last or not dist.initialized) else model.no_sync()
                with sync:
                    with autocast():
                        loss = model(**batch).loss / len(group)
                    loss.backward()
                # Summed on the device: reading it back (a host sync) waits for logging steps only.
                loss_sum = loss.detach() + loss_sum
            if config.optim.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(raw_model.parameters(), config.optim.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            elapsed = time.perf_counter() - t0
            rows = sum(len(i) for i in group) * dist.world_size
            state.step += 1
            state.batch_in_epoch = start + len(group)
            state.samples_seen += rows
            state.train_seconds += elapsed
            window_samples += rows
            window_time += elapsed
            window_loss.append(loss_sum)
            loss_sum = 0.0
            progress.update(1)
            epoch_end = state.batch_in_epoch >= len(batches)
            done = state.step >= total_steps

            if state.step % config.log_every_steps == 0 or done:
                mean_loss = float(torch.stack([torch.as_tensor(v) for v in window_loss]).mean())
                progress.set_postfix(loss=f"{mean_loss:.4f}", epoch=state.epoch, refresh=False)
                row = {
                    "step": state.step,
                    "epoch": state.epoch,
                    "loss": mean_loss,
                    "lr": scheduler.get_last_lr()[0],
                    "samples_per_s": window_samples / max(window_time, 1e-9),
                }
                if dist.device.type == "cuda":
                    row["gpu_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9
                    with contextlib.suppress(Exception):
                        row["gpu_utilization"] = float(torch.cuda.utilization())
                state.history.append(row)
                tracker.metrics({k: v for k, v in row.items() if k not in ("step", "epoch")}, state.step)
                # The TrainingNoProgress alert's stamp; never blocks (monitoring/progress.py).
                if dist.is_main:
                    training_progress.mark(state.step)
                log.info(
                    "step %d epoch %d loss %.4f lr %.2e %.1f samples/s",
                    state.step,
                    state.epoch,
                    row["loss"],
                    row["lr"],
                    row["samples_per_s"],
                )
                window_samples, window_time, window_loss = 0, 0.0, []

            evaluate_now = (
                (config.eval_every_steps and state.step % config.eval_every_steps == 0)
                or (not config.eval_every_steps and epoch_end)
                or done
            )
            if evaluate_now:
                try:
                    scores = validate(
                        config, dist, raw_model, encoded, pad_id, autocast, store, state, tracker
                    )
                except (StorageUnavailable, StorageAccessDenied) as exc:
                    # The best weights could not be stored: keep the run's state on local disk, then exit 69
                    # (an outage) or 2 (a refusal).
                    if rescue is not None and dist.is_main:
                        state_mod.save(
                            rescue, config, dist, raw_model, optimizer, scheduler, scaler, state, manifest_sha,
                            wall_start, solo=True,
                        )  # fmt: skip
                        state_mod.kept_locally(exc, rescue, ckpt.step_name(state.step))
                    raise
                wants_stop = bool(
                    hooks.on_evaluate and dist.is_main and hooks.on_evaluate(state.step, scores)
                )
                if dist.any(wants_stop) and not done:
                    hooks.stopped, done = "hook", True
                if config.patience and state.bad_evals >= config.patience:
                    log.info(
                        "early stop: %d validations without improvement (best step %s)",
                        state.bad_evals,
                        state.best_step,
                    )
                    state.stopped_early = done = True

            if epoch_end:
                state.epoch += 1
                state.batch_in_epoch = 0
            due_by_time = bool(config.checkpoint.every_minutes) and (
                time.monotonic() - last_save >= 60 * (config.checkpoint.every_minutes or 0)
            )
            due_by_steps = (
                bool(config.checkpoint.every_steps) and state.step % (config.checkpoint.every_steps or 1) == 0
            )
            if hooks.deadline is not None and dist.any(time.monotonic() >= hooks.deadline) and not done:
                log.info("deadline reached at step %d: saving and ending the run", state.step)
                hooks.stopped, done = "deadline", True
            stop_now = dist.any(bool(stop))
            # A run its caller stopped (a pruned trial) is never resumed: no final save, its best is stored.
            final = done and hooks.stopped != "hook"
            if dist.any(due_by_time) or due_by_steps or stop_now or final:
                state.finished = done and not stop_now
                if stop_now and not done:
                    state.preemptions += 1  # recorded in this checkpoint: the Job's preemption-loop cap
                save_times.append(
                    state_mod.save(
                        store,
                        config,
                        dist,
                        raw_model,
                        optimizer,
                        scheduler,
                        scaler,
                        state,
                        manifest_sha,
                        wall_start,
                        rescue=rescue,
                    )
                )
                last_save = time.monotonic()
            if stop_now and not done:
                progress.close()
                raise Preempted(stop.reason or "peer stop request", state.step, save_times[-1])
            if done or epoch_end:
                break
    progress.close()
    state.finished = True
    if dist.is_main:  # the run's Pushgateway group goes as the process exits (monitoring/progress.py)
        training_progress.finish()
