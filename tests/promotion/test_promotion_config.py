from __future__ import annotations

from pathlib import Path

import pytest

from promotion.config import DEFAULT_CONFIG, GateConfig, load_config, parse_config
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
        (
            {"gates": 1, "environments": {"dev": {"stack": "dev", "slo_p99_ms": 1}}},
            r"\[gates\] must be a table",
        ),
        ({"environments": ["dev"]}, r"must be tables: \[environments.NAME\]"),
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


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # A quoted "false" is a non-empty string: it used to switch these on (local runs into staging).
        (('allow_local_run = false\n\n[environments.prod]', 'allow_local_run = "false"\n\n[environments.prod]'),
         r"environments\.staging\.allow_local_run='false': must be true or false, unquoted"),
        (("require_approval = true", 'require_approval = "false"'), "require_approval='false'"),
        (("max_loadtest_errors = 0", "max_loadtest_errors = true"), "max_loadtest_errors=True"),
        (("parity_atol = 1e-4", "parity_atol = true"), "parity_atol=True: must be a finite number"),
        (('stack = "dev"', "stack = 1"), "`stack` must name a Pulumi stack"),
        # Was: AttributeError / TypeError tracebacks (exit 1).
        (("[environments.dev]\n", "[environments]\ndev = 1\n[environments.dev2]\n"), r"\[environments.dev\] must be a table"),
        # Out of range or of another kind: gates that could never fail (or never pass), a cycle promoting nothing.
        (('promote_from = "dev"', 'promote_from = ["dev"]'),
         r"environments\.staging\.promote_from=\['dev'\]: name another configured environment"),
        (("slo_p99_ms = 500.0", "slo_p99_ms = inf"), r"environments\.dev\.slo_p99_ms=inf: must be a number > 0"),
        (("champion_tolerance = 0.005", "champion_tolerance = 5"), r"gates\.champion_tolerance=5: must be <= 1"),
        (("max_int8_accuracy_drop = 0.02", "max_int8_accuracy_drop = 2.0"), r"max_int8_accuracy_drop=2\.0"),
        (("min_margin_over_baseline = 0.01", "min_margin_over_baseline = 1.5"), "between -1 and 1"),
        (('stack = "dev"\n', 'stack = "dev"\npromote_from = "prod"\n'),
         "promote_from cycle dev -> prod -> staging -> dev"),
    ],
)  # fmt: skip
def test_wrong_types_in_gates_toml_are_refused(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    text = DEFAULT_CONFIG.read_text()
    assert edit[0] in text
    path = tmp_path / "gates.toml"
    path.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(ConfigError, match=message):
        load_config(path)
