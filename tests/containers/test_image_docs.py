"""The environment contract in containers/README.md is the one declared in training/environment.py."""

from __future__ import annotations

from containers import docs


def test_readme_table_is_current() -> None:
    assert docs.main(["--check"]) == 0, "run `python -m containers.docs`"


def test_every_declared_variable_is_documented() -> None:
    from training.environment import ENVIRONMENT_VARIABLES

    text = docs.README.read_text()
    table = text[text.index(docs.START) : text.index(docs.END)]
    for var in ENVIRONMENT_VARIABLES:
        assert f"| `{var.name}` |" in table, var.name
