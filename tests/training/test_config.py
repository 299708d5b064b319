"""Config dataclasses, overrides and presets."""

from __future__ import annotations

import dataclasses

import pytest

from training import presets
from training.cli import main
from training.config import DataConfig, ModelConfig, RunConfig, apply_overrides, from_dict
from training.errors import ConfigError


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_presets_are_valid_and_round_trip(name: str) -> None:
    config = presets.get(name)
    assert from_dict(config.to_dict()) == config


def test_presets_match_their_purpose() -> None:
    smoke, demo, gpu = presets.smoke(), presets.demo(), presets.gpu()
    assert not smoke.model.pretrained and smoke.model.num_hidden_layers == 2
    assert demo.model.pretrained and demo.data.max_train_rows is not None
    assert gpu.precision == "bf16" and gpu.data.max_train_rows is None


def test_overrides_coerce_types_and_nested_keys() -> None:
    config = apply_overrides(
        presets.smoke(),
        [
            "optim.lr=3e-5",
            "epochs=4",
            "data.max_train_rows=none",
            "length_bucketing=true",
            "data.labels=neg,pos",
        ],
    )
    assert config.optim.lr == 3e-5 and config.epochs == 4
    assert config.data.max_train_rows is None and config.length_bucketing is True
    assert config.data.labels == ("neg", "pos")


@pytest.mark.parametrize(
    ("override", "field", "hint"),
    [
        ("optim.lr=-1", "optim.lr", "> 0"),
        ("optim.lr=fast", "optim.lr", "float"),
        ("epochs=0", "epochs", "> 0"),
        ("precision=fp8", "precision", "fp32"),
        ("data.test_fraction=0.7", "data.test_fraction", "(0, 0.5)"),
        ("nosuchkey=1", "nosuchkey", "unknown key"),
        ("optim=1", "optim", "section"),
        ("compile=maybe", "compile", "true or false"),
        ("data.max_length=4", "data.max_length", "[8, 512]"),
    ],
)
def test_bad_values_name_the_field_and_the_fix(override: str, field: str, hint: str) -> None:
    with pytest.raises(ConfigError) as err:
        apply_overrides(presets.smoke(), [override])
    assert err.value.field == field
    assert hint in str(err.value)


def test_size_overrides_need_random_init() -> None:
    with pytest.raises(ConfigError, match="model.pretrained"):
        ModelConfig(pretrained=True, hidden_size=64)
    with pytest.raises(ConfigError, match="divisible"):
        ModelConfig(pretrained=False, hidden_size=64, num_attention_heads=3)


def test_configs_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunConfig().epochs = 3  # type: ignore[misc]
    with pytest.raises(ConfigError, match="at least two distinct"):
        DataConfig(labels=("a", "a"))


def test_cli_bad_config_exits_2(tmp_path, capsys) -> None:  # noqa: ANN001
    code = main(["train", "--preset", "smoke", "--output", str(tmp_path), "optim.lr=0"])
    assert code == 2
    assert "optim.lr" in capsys.readouterr().err
    assert main(["train", "--preset", "nope", "--output", str(tmp_path)]) == 2


def test_help_does_not_import_heavy_libraries() -> None:
    import subprocess
    import sys

    code = (
        "import sys, contextlib, io\n"
        "from training.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): main(['--help'])\n"
        "heavy = [m for m in ('torch', 'transformers', 'boto3', 'mlflow', 's3fs') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
