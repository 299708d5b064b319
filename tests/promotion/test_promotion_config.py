from __future__ import annotations

from pathlib import Path

import pytest

from promotion.config import GateConfig, load_config, parse_config
from promotion.errors import ConfigError


def test_default_config_loads() -> None:
    cfg = load_config()
    assert set(cfg.environments) == {"dev", "staging", "prod"}
    assert cfg.environment("prod").require_approval and not cfg.environment("prod").allow_local_run
    assert cfg.environment("dev").allow_local_run


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"gates": {"metric": "loss"}, "environments": {"dev": {"stack": "dev", "slo_p99_ms": 1}}},
            "use one of",
        ),
        (
            {"gates": {"parity_atol": -1}, "environments": {"dev": {"stack": "dev", "slo_p99_ms": 1}}},
            "must be >= 0",
        ),
        ({"gates": {"typo": 1}, "environments": {"dev": {"stack": "dev", "slo_p99_ms": 1}}}, "unknown key"),
        ({"gates": {}, "environments": {}}, "at least one environment"),
        ({"environments": {"dev": {"stack": "dev"}}}, "slo_p99_ms"),
        ({"environments": {"dev": {"stack": "dev", "slo_p99_ms": 0}}}, "must be a number > 0"),
        (
            {
                "environments": {
                    "p": {"stack": "p", "slo_p99_ms": 1, "require_approval": True, "allow_local_run": True}
                }
            },
            "make no sense",
        ),
    ],
)
def test_invalid_config_says_how_to_fix(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(data)


def test_unknown_environment_lists_known() -> None:
    with pytest.raises(ConfigError, match="configured are dev, staging, prod"):
        load_config().environment("qa")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_frozen() -> None:
    with pytest.raises(AttributeError):
        GateConfig().metric = "f1"  # type: ignore[misc]
