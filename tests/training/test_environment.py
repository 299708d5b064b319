"""Every environment variable the training package reads is declared once in training/environment.py."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from training import environment as env
from training.cli import main

PACKAGE = Path(env.__file__).parent
READ = re.compile(
    r"""(?:os\.environ\.get|os\.getenv|os\.environ\.setdefault|os\.environ)\s*[\(\[]\s*["']([A-Z0-9_]+)["']"""
)


def test_every_variable_read_is_declared() -> None:
    declared = {v.name for v in env.ENVIRONMENT_VARIABLES}
    used = {
        (name, path.name)
        for path in PACKAGE.glob("*.py")
        if path.name != "environment.py"
        for name in READ.findall(path.read_text(encoding="utf-8"))
    }
    undeclared = sorted(f"{name} ({where})" for name, where in used if name not in declared)
    # MLflow's own switch, set (not read) only when we pick the local file store for the user.
    undeclared = [u for u in undeclared if not u.startswith("MLFLOW_ALLOW_FILE_STORE")]
    assert not undeclared, f"declare these in training/environment.py: {undeclared}"
    assert len(declared) == len(env.ENVIRONMENT_VARIABLES), "a variable is declared twice"


def test_typed_values_and_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINING_PG_TIMEOUT_S", "30")
    monkeypatch.setenv("TRAINING_MLFLOW", "off")
    assert env.TRAINING_PG_TIMEOUT_S.get() == 30.0
    assert env.TRAINING_MLFLOW.get() is False
    monkeypatch.setenv("TRAINING_NODES", "two")
    with pytest.raises(ValueError, match="TRAINING_NODES: 'two' is not a valid int"):
        env.TRAINING_NODES.get()
    monkeypatch.delenv("TRAINING_NODES")
    assert env.TRAINING_NODES.get() is None


def test_env_command_lists_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in rows]
    assert "TRAINING_CHECKPOINT_URI" in names and "TRAINING_INTERRUPTION_PROVIDER" in names
    assert all(r["doc"] for r in rows)


def test_a_bad_value_fails_the_command_at_start_with_exit_2(tmp_path: Path) -> None:
    """TRAINING_STORAGE_RETRY_S is read only when a store call fails: checked late, a typo would turn the first
    storage blip of a long run into a crash. Every declared variable is read before the command runs."""
    import os
    import subprocess
    import sys

    environ = {**os.environ, "TRAINING_STORAGE_RETRY_S": "5m", "TRAINING_MLFLOW": "maybe"}
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "training", "train", "--preset", "smoke", "--output", str(out)],
        cwd=PACKAGE.parent,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "TRAINING_STORAGE_RETRY_S: '5m' is not a valid float" in proc.stderr
    assert "TRAINING_MLFLOW: 'maybe' is not a valid bool" in proc.stderr
    assert not out.exists()  # nothing started
    listing = subprocess.run(
        [sys.executable, "-m", "training", "env"],
        cwd=PACKAGE.parent,
        env=environ,
        capture_output=True,
        text=True,
    )
    assert (
        listing.returncode == 0 and "TRAINING_STORAGE_RETRY_S" in listing.stdout
    )  # how the user finds the fix


@pytest.mark.parametrize("module", ["training.export", "training.launch", "training.tune"])
def test_a_subcommand_whose_module_cannot_load_says_what_is_missing(
    module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In an environment without a subcommand's dependencies, `python -m training tune ...` said only
    "invalid choice: 'tune'": the import error was logged at debug level and the subcommand dropped."""
    monkeypatch.setitem(sys.modules, module, None)  # the import fails as a missing dependency would
    name = module.rsplit(".", 1)[1]
    assert main([name, "--preset", "smoke", "--output", "x"]) == 2
    err = capsys.readouterr().err
    assert f"`python -m training {name}` is unavailable in this environment" in err and module in err
