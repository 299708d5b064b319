"""A rerun into the checkpoints of a FINISHED run: what it may change, and what it costs.

The same config re-reports the run (scores, metrics.json, cost.json, export) without training. Before this
module a changed config did the same with one warning, so `epochs=5` over a finished 3-epoch run exited 0 with
the 3-epoch model, and a new lr, dataset or preset reported the old model under the new config. Now:

- only the length grew (``epochs``, ``max_steps``, or ``patience`` after an early stop): training goes on from the
  final step to the new target, as Hugging Face Trainer's ``resume_from_checkpoint`` does with a larger
  ``num_train_epochs``. The learning-rate schedule is the new total's (a resumed run's rule), so the lr rises
  from ~0 at the old end to where the longer decay puts that step: not the run a fresh 5-epoch one would be.
- anything else that decides the weights changed, or the new length ends before the run did: exit 2 naming
  each field ``old -> new`` and the fix (a new --output, or the run's own values to re-report it).
- settings of how the run executes or reports (NOT_RESULT) are applied by the re-report: ``export=true`` over a
  finished run writes its bundle, ``device=cpu`` re-scores a GPU run on a laptop.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from training.config import RunConfig
from training.errors import ConfigError

log = logging.getLogger("training")

LENGTH = ("epochs", "max_steps", "patience")
"""Where the run ends: growing them trains on from a finished run's final step."""

NOT_RESULT = frozenset(
    {
        "name", "eval_batch_size", "log_every_steps", "export", "quantize", "mlflow", "baselines",
        "cloud", "region", "instance_type", "device", "cpu_threads", "compile", "precision", "dynamic_padding",
    }
)  # fmt: skip
"""How the run executes or reports, not what it learns (checkpoint.* too: where and how often it saves)."""


def decides_result(key: str) -> bool:
    """Whether a dotted config key changes the trained model (the checks of a finished run and of a study)."""
    return key not in NOT_RESULT and not key.startswith("checkpoint.")


def flat(nested: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in nested.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def same(a: Any, b: Any) -> bool:
    # The saved side went through JSON (tuples are lists there): compare both as JSON.
    return json.dumps(a, default=str, sort_keys=True) == json.dumps(b, default=str, sort_keys=True)


def trains_on(trainer: dict[str, Any], where: str, config: RunConfig, total_steps: int) -> bool:
    """For a checkpoint (trainer.json's content) of a finished run: True when this config asks for more
    training; False to re-report it; ConfigError (exit 2) when its result would not be this config's."""
    state = trainer["state"]
    if not state.get("finished"):
        return False  # an unfinished run: resume's own rules (training/state.py)
    saved, current = flat(trainer.get("config") or {}), config.flat()
    changed = {
        k: (saved[k], current[k])
        for k in current
        if k in saved and decides_result(k) and not same(saved[k], current[k])
    }
    if not changed:
        return False
    step = int(state["step"])
    conflicts = [f"{k}: {old} -> {new}" for k, (old, new) in changed.items() if k not in LENGTH]
    if total_steps < step and any(k in LENGTH for k in changed):
        conflicts.append(
            f"{_length(changed)} ends at step {total_steps}, the run already trained {step} steps"
        )
    earlier = _early_stop_step(state, config) if "patience" in changed else None
    if earlier is not None:
        conflicts.append(
            f"patience: {saved.get('patience')} -> {config.patience} would have stopped the run at step {earlier} "
            f"of its {step}"
        )
    if conflicts:
        first = next(iter(changed))
        raise ConfigError(
            first,
            f"checkpoint {where} is a finished run whose model this config would not produce: "
            f"{'; '.join(conflicts)}. Train this config into a new --output (or a new checkpoint.uri); to "
            "re-report the finished run, rerun it with its own values: "
            + " ".join(f"{k}={_override(old)}" for k, (old, _) in changed.items()),
        )
    stopped_early = bool(state.get("stopped_early"))
    still_stopped = (
        stopped_early and config.patience is not None and state.get("bad_evals", 0) >= config.patience
    )
    if total_steps > step and not still_stopped:
        log.warning(
            "checkpoint %s is a finished run (step %d); %s asks for %d steps: training on from step %d (the lr "
            "schedule is the new total's; use a new --output for a run trained from scratch to that length)",
            where,
            step,
            _length(changed),
            total_steps,
            step,
        )
        return True
    if still_stopped and total_steps > step:
        log.warning(
            "checkpoint %s stopped early at step %d (%d validations without improvement, patience %s): %s trains "
            "no further and the run is re-reported. To train on, raise patience (or patience=none); for a fresh "
            "run, use a new --output",
            where,
            step,
            state.get("bad_evals", 0),
            config.patience,
            _length(changed),
        )
    else:
        log.info(
            "checkpoint %s is a finished run that %s leaves as it is: re-reporting it",
            where,
            _length(changed),
        )
    return False


def reopen(state: Any) -> None:
    """Let the loop train a finished run on (trains_on said so); its patience count carries over."""
    state.finished = False
    state.stopped_early = False


def _early_stop_step(state: dict[str, Any], config: RunConfig) -> int | None:
    """The validation step before the run's last at which this config's patience would have stopped it, from the
    run's own validation history (training/evaluate.py: an improvement is a strictly higher value)."""
    if config.patience is None:
        return None
    key = f"val_{config.early_stopping_metric}"
    best, bad = -math.inf, 0
    for row in state.get("history") or []:
        if key not in row:
            continue
        value = row[key]
        if value is not None and value > best:
            best, bad = value, 0
        else:
            bad += 1
        if bad >= config.patience and row["step"] < int(state["step"]):
            return int(row["step"])
    return None


def _length(changed: dict[str, tuple[Any, Any]]) -> str:
    return (
        ", ".join(f"{k}: {old} -> {new}" for k, (old, new) in changed.items() if k in LENGTH) or "this config"
    )


def _override(value: Any) -> str:
    return "none" if value is None else ",".join(map(str, value)) if isinstance(value, list) else str(value)


def reported_wall(output: Path, state: Any, manifest_sha: str) -> float:
    """The wall time of a finished run re-reported without training: what its report said, not more.

    Each re-report added its own seconds (data, model, scoring) to the run's, so cost.json grew with every
    rerun of a run that trained nothing more. The run's metrics.json (same step, same data) holds the time its
    first report measured; without it (a new pod's empty --output), the time up to the run's final checkpoint.
    """
    try:
        previous = json.loads((output / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = {}
    if (
        isinstance(previous, dict)
        and previous.get("steps") == state.step
        and previous.get("dataset_manifest_sha256") == manifest_sha
        and isinstance(previous.get("wall_seconds"), int | float)
        and previous["wall_seconds"] >= state.wall_seconds
    ):
        return float(previous["wall_seconds"])
    return float(state.wall_seconds)
