"""The study's sampler, seeded so that no two sampler processes draw the same parameters.

Optuna's samplers draw from their own random state, not from the study: two processes seeded alike sample alike.
With `--seed` used as is, the tuning workers of `launch --tune` (same command, same seed) drew the same
parameters for their first trials, and a worker rerun after a preemption (exit 75, spot) drew trial 0's again:
trials paid for twice. The seed stays `--seed` for the first worker of a fresh study, so a study run on one
machine (and benchmarks/tune.py) is reproducible; every other (worker, reopening) gets its own stream.
"""

from __future__ import annotations

import zlib
from typing import Any


def sampler_seed(seed: int, worker: str, first_worker: bool, trials_before: int) -> int:
    """`first_worker`: worker index 0 of an Indexed Job, or a worker that was not named (one process)."""
    if first_worker and trials_before == 0:
        return seed
    return zlib.crc32(f"{seed}/{worker}/{trials_before}".encode())


def build(kind: str, seed: int, grid: Any, trials: int) -> Any:
    import optuna

    if kind == "grid":
        return optuna.samplers.GridSampler(grid, seed=seed)
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(4, trials))
