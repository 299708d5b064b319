"""The promotion thresholds: one typed, validated, frozen config read from gates.toml.

Nothing else in the package reads the TOML file; gates receive these objects.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promotion.errors import ConfigError

DEFAULT_CONFIG = Path(__file__).with_name("gates.toml")
METRICS = ("accuracy", "f1", "auc")


@dataclass(frozen=True, kw_only=True, slots=True)
class GateConfig:
    metric: str = "accuracy"
    """Test metric compared against the baseline and the champion (accuracy, f1 or auc)."""
    min_margin_over_baseline: float = 0.01
    """Candidate metric minus TF-IDF baseline metric must be at least this."""
    champion_tolerance: float = 0.005
    """Candidate may be at most this much worse than the environment's current model."""
    parity_atol: float = 1e-4
    """Largest allowed |ONNX logits - PyTorch logits|."""
    max_int8_accuracy_drop: float = 0.02
    """Largest allowed fp32 - int8 test accuracy, when an int8 model is shipped."""
    max_loadtest_errors: int = 0
    """Failed requests allowed in the load test."""

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ConfigError(f"gates.metric={self.metric!r}: use one of {', '.join(METRICS)}")
        for name in (
            "min_margin_over_baseline",
            "champion_tolerance",
            "parity_atol",
            "max_int8_accuracy_drop",
        ):
            value = getattr(self, name)
            if not _is_number(value) or not math.isfinite(value):
                raise ConfigError(f"gates.{name}={value!r}: must be a finite number")
        for name in ("champion_tolerance", "parity_atol", "max_int8_accuracy_drop"):
            if getattr(self, name) < 0:
                raise ConfigError(f"gates.{name}={getattr(self, name)!r}: must be >= 0 (it is a tolerance)")
        # The metrics are fractions in [0, 1]: past 1 a tolerance lets everything through and a margin nothing (a
        # percentage typed for a fraction, 5 for 0.05).
        for name in ("champion_tolerance", "max_int8_accuracy_drop"):
            if getattr(self, name) > 1:
                raise ConfigError(
                    f"gates.{name}={getattr(self, name)!r}: must be <= 1 (metrics are fractions: 0.005 is half a point)"
                )
        if abs(self.min_margin_over_baseline) > 1:
            raise ConfigError(
                f"gates.min_margin_over_baseline={self.min_margin_over_baseline!r}: must be between -1 and 1 "
                "(metrics are fractions: 0.01 is one point)"
            )
        if (
            not isinstance(self.max_loadtest_errors, int)
            or isinstance(self.max_loadtest_errors, bool)
            or self.max_loadtest_errors < 0
        ):
            raise ConfigError(
                f"gates.max_loadtest_errors={self.max_loadtest_errors!r}: must be an integer >= 0"
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class EnvironmentConfig:
    name: str
    stack: str
    """Pulumi stack deployed for this environment; its policy report is a gate input."""
    slo_p99_ms: float
    """Serving p99 latency objective, checked at every load-test concurrency."""
    require_approval: bool = False
    """A recorded human approval (approver distinct from the requester) is a gate."""
    allow_local_run: bool = False
    """A local run without an image registry may be evaluated (image gate not applicable, not deployable)."""
    promote_from: str | None = None
    """The environment a candidate must be deployed in first (checked from the promotion records)."""
    loadtest_from: str | None = None
    """Whose load test judges the candidate: that environment's promotion record names it (prod: staging)."""

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.stack, str) or not self.stack:
            raise ConfigError(
                f'environment {self.name!r}: `stack` must name a Pulumi stack (e.g. stack = "dev")'
            )
        # TOML has real booleans: a quoted "false" is a non-empty string, which Python would take as true
        # (allow_local_run = "false" allowed local runs).
        for key in ("require_approval", "allow_local_run"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(
                    f"environments.{self.name}.{key}={getattr(self, key)!r}: must be true or false, unquoted"
                )
        # inf would be an SLO no load test can miss.
        if not _is_number(self.slo_p99_ms) or not 0 < self.slo_p99_ms < math.inf:
            raise ConfigError(
                f"environments.{self.name}.slo_p99_ms={self.slo_p99_ms!r}: must be a number > 0"
            )
        if self.allow_local_run and self.require_approval:
            raise ConfigError(
                f"environments.{self.name}: allow_local_run and require_approval together make no sense; "
                "an environment that needs an approval deploys pinned images"
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class PromotionConfig:
    gates: GateConfig
    environments: dict[str, EnvironmentConfig]

    def environment(self, name: str) -> EnvironmentConfig:
        try:
            return self.environments[name]
        except KeyError:
            raise ConfigError(
                f"unknown environment {name!r}: configured are {', '.join(self.environments)} "
                "(pass --config with the team's gate config that names it, or add a [environments.NAME] table to it)"
            ) from None

    def as_dict(self) -> dict[str, Any]:
        return {
            "gates": dataclasses.asdict(self.gates),
            "environments": {k: dataclasses.asdict(v) for k, v in self.environments.items()},
        }


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _build(cls: type, section: str, values: Any, **extra: Any) -> Any:
    if not isinstance(values, dict):
        raise ConfigError(f"[{section}] must be a table of keys, not {values!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(
            f"[{section}]: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    try:
        return cls(**values, **extra)
    except TypeError as exc:  # a required key is missing
        raise ConfigError(f"[{section}]: {exc}") from None


def parse_config(data: dict[str, Any]) -> PromotionConfig:
    unknown = sorted(set(data) - {"gates", "environments"})
    if unknown:
        raise ConfigError(
            f"unknown top-level table(s) {', '.join(unknown)}: use [gates] and [environments.NAME]"
        )
    gates = _build(GateConfig, "gates", data.get("gates", {}))
    envs_raw = data.get("environments") or {}
    if not isinstance(envs_raw, dict):
        raise ConfigError("`environments` must be tables: [environments.NAME]")
    if not envs_raw:
        raise ConfigError("no [environments.NAME] table: at least one environment must be configured")
    envs = {
        name: _build(
            EnvironmentConfig,
            f"environments.{name}",
            {k: v for k, v in raw.items() if k != "name"} if isinstance(raw, dict) else raw,
            name=name,
        )
        for name, raw in envs_raw.items()
    }
    for env in envs.values():
        for key in ("promote_from", "loadtest_from"):
            other = getattr(env, key)
            # `isinstance` first: a list (`promote_from = ["dev"]`) is unhashable, a TypeError traceback with exit 1.
            if other is not None and (not isinstance(other, str) or other not in envs or other == env.name):
                raise ConfigError(
                    f"environments.{env.name}.{key}={other!r}: name another configured environment "
                    f"({', '.join(e for e in envs if e != env.name)})"
                )
    _no_cycle(envs)
    return PromotionConfig(gates=gates, environments=envs)


def _no_cycle(envs: dict[str, EnvironmentConfig]) -> None:
    """Each `promote_from` chain ends at an environment taking candidates from nowhere: in a cycle every candidate
    must first be deployed where it can never be, so nothing is ever promoted (each gate run saying "promote it to
    X first")."""
    for start in envs:
        chain = [start]
        while (nxt := envs[chain[-1]].promote_from) is not None:
            if nxt in chain:
                raise ConfigError(
                    f"promote_from cycle {' -> '.join([*chain[chain.index(nxt) :], nxt])}: one environment "
                    "(the first, dev) must have no promote_from"
                )
            chain.append(nxt)


def load_config(path: str | Path | None = None) -> PromotionConfig:
    path = Path(path) if path else DEFAULT_CONFIG
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:  # TOML is UTF-8; this was a traceback with exit 1 (a gate's rejection)
        raise ConfigError(
            f"gate config {path} is not UTF-8 ({exc}): save it as UTF-8, as TOML requires"
        ) from None
    except (FileNotFoundError, IsADirectoryError):  # a folder was an OSError message blaming --store
        raise ConfigError(
            f"gate config {path} not found: pass --config FILE or restore promotion/gates.toml"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"gate config {path} is not valid TOML: {exc}") from None
    return parse_config(data)
