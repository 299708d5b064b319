"""One training run: plain PyTorch, DDP-ready, checkpointed, interruptible.

One call, ``run(config, output)``, does: data -> tokens -> model -> resume -> loop (training/loop.py:
AdamW, warmup + linear decay, clipping, accumulation, eval + early stopping, periodic and
preemption checkpoints) -> best model -> test metrics + baselines -> model folder, export
bundle, metrics.json, manifest.json, cost.json, MLflow. Returns the process exit code.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

from training import accel, data, distributed, features, output_lock, preemption, report, rerun, resume_checks
from training import checkpoint as ckpt
from training import environment as env
from training import state as state_mod
from training.config import RunConfig
from training.errors import EXIT_OK, EXIT_PREEMPTED, ConfigError, Preempted, TrainingError
from training.loop import Hooks, run_loop
from training.model import build_model, check_max_length, load_tokenizer
from training.state import State
from training.tracking import Tracker

log = logging.getLogger("training")


def _setup_logging(rank: int) -> None:
    # Libraries (onnxruntime's quantizer, werkzeug, mlflow) log chatty INFO lines on the root logger:
    # only ours speak at INFO, and only on rank 0.
    logging.basicConfig(
        level=logging.WARNING,
        format=f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )
    logging.getLogger("training").setLevel(logging.INFO if rank == 0 else logging.WARNING)


def run(config: RunConfig, output: Path, hooks: Hooks | None = None) -> int:
    """Train; returns 0 when done, 75 when preempted after saving a checkpoint. Raises TrainingError on bad input."""
    wall_start = time.monotonic()
    try:
        dist = distributed.init(config.device)
    except Exception as exc:
        # A peer reclaimed between the rendezvous and the process group's own barrier (or its host gone): the
        # same "reschedule me" as a peer lost mid-run, not a crash that would fail the Job for good.
        if not distributed.is_lost_peer(exc):
            raise
        _setup_logging(env.RANK.get() or 0)
        return _lost_peer(exc)
    _setup_logging(dist.rank)
    lock = None
    try:
        lock = _lock_output(output, dist)
        return _run(config, output, dist, wall_start, hooks or Hooks())
    except Preempted as exc:
        log.warning("%s", exc)
        if dist.is_main:
            (output / "preempted.json").write_text(
                json.dumps({"reason": exc.reason, "step": exc.step, "save_seconds": exc.save_seconds}),
                encoding="utf-8",
            )
        return EXIT_PREEMPTED
    except Exception as exc:
        if not (dist.initialized and distributed.is_lost_peer(exc)):
            raise
        return _lost_peer(exc)
    finally:
        output_lock.release(lock)
        with contextlib.suppress(Exception):
            dist.close()


def _lock_output(output: Path, dist: distributed.Dist) -> int | None:
    """Rank 0 takes OUTPUT's lock (training/output_lock.py); every rank learns whether it was refused, so that
    the other ranks exit 2 with it instead of waiting in a collective for a rank 0 that is gone."""
    fd, refusal = None, None
    if dist.is_main:
        try:
            output.mkdir(parents=True, exist_ok=True)
            fd = output_lock.acquire(output)
        except ConfigError as exc:
            refusal = exc
        except OSError as exc:  # a file there, no permission, a read-only mount: was a traceback, exit 1
            refusal = ConfigError(
                "--output", f"cannot use {output} as the run folder ({exc}): give a writable folder"
            )
    message = dist.broadcast_object(str(refusal) if refusal else None)
    if refusal is not None:
        raise refusal
    if message is not None:
        raise TrainingError(message)
    return fd


def _lost_peer(exc: BaseException) -> int:
    log.error(
        "a peer or the rendezvous store was lost (%s): exiting %d so the job reschedules",
        str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        EXIT_PREEMPTED,
    )
    return EXIT_PREEMPTED


def _run(config: RunConfig, output: Path, dist: distributed.Dist, wall_start: float, hooks: Hooks) -> int:
    import torch

    output.mkdir(parents=True, exist_ok=True)
    if dist.is_main:
        (output / "preempted.json").unlink(missing_ok=True)  # about an earlier attempt; this one may finish
    cuda = dist.device.type == "cuda"
    speed = accel.configure(config, dist.device)
    log.info("device settings: %s", speed)
    random.seed(config.seed + dist.rank)
    np.random.seed(config.seed + dist.rank)
    torch.manual_seed(config.seed + dist.rank)

    # Before the data and the model: a checkpoint bucket that is missing or refuses us is exit 2 now, not a
    # traceback at the first save after the steps before it were paid for.
    ckpt_uri = config.checkpoint.uri or env.TRAINING_CHECKPOINT_URI.get() or str(output / "checkpoints")
    store = ckpt.Store(ckpt_uri)
    store.check_writable()
    rescue = state_mod.rescue_store(store, output)

    # --- data ----------------------------------------------------------------------------
    dataset = data.load(config.data)
    tokenizer = load_tokenizer(config.model)
    pad_id = tokenizer.pad_token_id or 0
    encoded, token_cache = features.encode_dataset(tokenizer, dataset, config.data.max_length)
    train = encoded["train"]
    log.info(
        "data: %s rows train/val/test %d/%d/%d, manifest %s, split cache %s, token cache %s, %d bytes read from source",
        config.data.source,
        len(train),
        len(encoded["validation"]),
        len(encoded["test"]),
        dataset.manifest["sha256"][:12],
        dataset.stats["split_cache"],
        token_cache,
        dataset.stats["bytes_read_from_source"],
    )

    # --- model, optimizer, schedule --------------------------------------------------------
    raw_model = build_model(config.model, config.data.labels, config.seed).to(dist.device)
    check_max_length(raw_model, config.data.max_length, lambda msg: ConfigError("data.max_length", msg))
    model = accel.wrap(raw_model, config, dist)
    optimizer = accel.optimizer(raw_model, config, cuda)
    accum = config.optim.grad_accum_steps
    batches_per_epoch = math.ceil(math.ceil(len(train) / dist.world_size) / config.batch_size)
    steps_per_epoch = math.ceil(batches_per_epoch / accum)
    total_steps = config.epochs * steps_per_epoch
    if config.max_steps:
        total_steps = min(total_steps, config.max_steps)
    warmup = int(config.optim.warmup_fraction * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, accel.schedule(warmup, total_steps))
    scaler = torch.amp.GradScaler(enabled=False)  # bf16 needs no loss scaling; kept for fp16 forks
    autocast = accel.autocast_factory(config, dist.device)

    # --- resume ------------------------------------------------------------------------------
    state = State()
    if config.checkpoint.resume:
        state = (
            state_mod.resume(
                store,
                config,
                dist,
                raw_model,
                optimizer,
                scheduler,
                scaler,
                dataset.manifest["sha256"],
                rescue=rescue,
                total_steps=total_steps,
            )
            or state
        )
    else:
        resume_checks.check_fresh_start(store)
    resume_checks.check_preemption_cap(state)
    state.attempts += 1

    tracker = Tracker(config.mlflow and bool(env.TRAINING_MLFLOW.get()) and dist.is_main, output, config.name)
    state.mlflow_run_id = tracker.start(
        {
            **config.flat(),
            "world_size": dist.world_size,
            "dataset_manifest_sha256": dataset.manifest["sha256"],
        },
        run_id=state.mlflow_run_id,
    )

    stop = preemption.StopRequest()
    uninstall = preemption.install_signal_handlers(stop)
    watcher = preemption.start_watcher(stop)
    save_times: list[float] = []
    # A finished run rerun with its config (training/rerun.py): nothing trains, so it costs no more than it did.
    reported_wall = rerun.reported_wall(output, state, dataset.manifest["sha256"]) if state.finished else None
    try:
        if not state.finished:
            run_loop(
                config,
                dist,
                model,
                raw_model,
                optimizer,
                scheduler,
                scaler,
                autocast,
                encoded,
                pad_id,
                store,
                state,
                stop,
                tracker,
                save_times,
                total_steps,
                wall_start,
                dataset.manifest["sha256"],
                hooks,
                rescue,
            )
    finally:
        uninstall()
        if watcher:
            watcher.close()

    # --- best model, final metrics, artifacts -----------------------------------------------
    if hooks.stopped == "hook":  # every rank agreed (dist.any): nobody enters score_best's collectives
        if not dist.is_main:
            return EXIT_OK
        return report.finish_stopped(
            config, output, dist, dataset, state, store, tracker, save_times, token_cache, wall_start
        )
    best, results = report.score_best(config, dist, raw_model, encoded, pad_id, autocast, store, state)
    if not dist.is_main:
        return EXIT_OK
    return report.finish(
        config,
        output,
        dist,
        raw_model,
        tokenizer,
        dataset,
        results,
        state,
        store,
        best,
        tracker,
        save_times,
        token_cache,
        wall_start,
        wall_seconds=reported_wall,
    )
