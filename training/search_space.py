"""The hyperparameter search space per preset, declared as data in training/search_space.json.

Each parameter is a training override key (``optim.lr``, ``batch_size``...), so a sampled trial is
exactly ``python -m training train --preset P key=value ...``. Validated once, on load: a bad entry
fails with its preset, key and the fix.

Each preset's ``pruning`` block says what the pruner judges and how: ``metric``, the validation score reported
to the trial at each validation (accuracy, f1 or auc: the scores training/metrics.py computes; the study's
objective stays val_accuracy), and the Optuna arguments of each pruner (``median``, ``halving``). A file
without the block gets DEFAULT_PRUNING: the study's own metric, Optuna's usual arguments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.config import apply_overrides
from training.errors import ConfigError

SPACES = Path(__file__).with_name("search_space.json")
# The keys of training/metrics.py scores(), what the trainer's validation hands the trial.
PRUNING_METRICS = ("accuracy", "f1", "auc")
PRUNER_ARGS = {  # the Optuna arguments a preset may set, per --pruner
    "median": ("n_startup_trials", "n_warmup_steps", "interval_steps", "n_min_trials"),
    "halving": ("min_resource", "reduction_factor", "min_early_stopping_rate", "bootstrap_count"),
}
DEFAULT_PRUNING: dict[str, Any] = {
    "metric": "accuracy",
    "median": {"n_startup_trials": 1, "n_warmup_steps": 0, "interval_steps": 1},
    "halving": {"min_resource": 1, "reduction_factor": 3},
}


@dataclass(frozen=True, slots=True)
class Pruning:
    metric: str
    """Validation score reported to the trial (its best so far) at each validation: what the pruner judges."""
    args: dict[str, dict[str, int]]
    """Optuna arguments per pruner name (median, halving)."""

    def build(self, name: str) -> Any:
        """The Optuna pruner for ``--pruner NAME`` (none: never prunes)."""
        import optuna

        if name == "median":
            return optuna.pruners.MedianPruner(**self.args["median"])
        if name == "halving":
            return optuna.pruners.SuccessiveHalvingPruner(**self.args["halving"])
        return optuna.pruners.NopPruner()

    def describe(self, name: str) -> str:
        if name not in self.args:
            return "none"
        kind = {"median": "MedianPruner", "halving": "SuccessiveHalvingPruner"}[name]
        args = ", ".join(f"{k}={v}" for k, v in self.args[name].items())
        return f"{kind}({args}) on the best-so-far validation {self.metric}"


@dataclass(frozen=True, slots=True)
class Param:
    key: str
    """Training override key, e.g. optim.lr."""
    kind: str
    """float, int or categorical."""
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    grid: tuple[Any, ...] = ()
    """Values the grid sampler tries."""

    def suggest(self, trial: Any) -> Any:
        """Ask an Optuna trial for this parameter (a resumed trial gets its stored value back)."""
        if self.kind == "float":
            return trial.suggest_float(self.key, self.low, self.high, log=self.log)
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low or 0), int(self.high or 0), log=self.log)
        return trial.suggest_categorical(self.key, list(self.choices))


@dataclass(frozen=True, slots=True)
class SearchSpace:
    preset: str
    params: tuple[Param, ...]
    fixed: dict[str, str]
    """Overrides every trial gets."""
    eur_per_usd: float
    """Converts the USD price table into the EUR budget."""
    pruning: Pruning = Pruning(DEFAULT_PRUNING["metric"], {k: DEFAULT_PRUNING[k] for k in PRUNER_ARGS})

    def grid(self) -> dict[str, list[Any]]:
        return {p.key: list(p.grid) for p in self.params}


def _param(preset: str, key: str, raw: dict[str, Any]) -> Param:
    where = f"search_space.json presets.{preset}.params.{key}"
    kind = raw.get("type")
    grid = tuple(raw.get("grid", ()))
    if not grid:
        raise ConfigError(where, "needs a non-empty 'grid' list (the values the grid sampler tries)")
    if kind in ("float", "int"):
        low, high = raw.get("low"), raw.get("high")
        if low is None or high is None or not low < high:
            raise ConfigError(where, f"needs low < high, got low={low!r} high={high!r}")
        if raw.get("log") and low <= 0:
            raise ConfigError(where, "log scale needs low > 0")
        if any(not low <= g <= high for g in grid):
            raise ConfigError(where, f"grid {list(grid)} leaves [{low}, {high}]")
        return Param(key, kind, float(low), float(high), bool(raw.get("log", False)), (), grid)
    if kind == "categorical":
        choices = tuple(raw.get("choices", ()))
        if not choices or any(g not in choices for g in grid):
            raise ConfigError(where, "needs 'choices', and every grid value among them")
        return Param(key, kind, choices=choices, grid=grid)
    raise ConfigError(where, f"type must be float, int or categorical, got {kind!r}")


def _pruning(preset: str, raw: dict[str, Any]) -> Pruning:
    where = f"search_space.json presets.{preset}.pruning"
    metric = raw.get("metric", DEFAULT_PRUNING["metric"])
    if metric not in PRUNING_METRICS:
        raise ConfigError(f"{where}.metric", f"must be one of {', '.join(PRUNING_METRICS)}, got {metric!r}")
    args: dict[str, dict[str, int]] = {}
    for name, allowed in PRUNER_ARGS.items():
        given = raw.get(name, DEFAULT_PRUNING[name])
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            raise ConfigError(
                f"{where}.{name}", f"unknown {unknown}; Optuna's arguments are {', '.join(allowed)}"
            )
        if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in given.values()):
            raise ConfigError(f"{where}.{name}", f"values must be integers >= 0, got {given}")
        args[name] = dict(given)
    return Pruning(str(metric), args)


def load(preset: str, path: Path = SPACES) -> SearchSpace:
    """The preset's space; every key is checked against the training config (a typo fails here, not in trial 7)."""
    from training import presets

    doc = json.loads(path.read_text(encoding="utf-8"))
    spaces = doc["presets"]
    if preset not in spaces:
        raise ConfigError(
            "preset", f"no search space for {preset!r} in {path.name}; have {', '.join(spaces)}"
        )
    entry = spaces[preset]
    params = tuple(_param(preset, key, raw) for key, raw in entry["params"].items())
    fixed = {str(k): str(v) for k, v in entry.get("fixed", {}).items()}
    base = apply_overrides(presets.get(preset), fixed)
    for p in params:  # each key must be a real override with values the config accepts
        for value in p.grid:
            apply_overrides(base, {p.key: str(value)})
    pruning = _pruning(preset, entry.get("pruning", {}))
    return SearchSpace(preset, params, fixed, float(doc["eur_per_usd"]), pruning)
