"""The enforcement-by-environment table (policies/enforcement.yaml), read by the pack and the report."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

TABLE_FILE = Path(__file__).with_name("enforcement.yaml")
LEVELS = ("advisory", "mandatory", "not-applicable")
ENVIRONMENTS = ("dev", "staging", "prod")


@dataclass(frozen=True)
class Table:
    unknown_environment: str
    levels: dict[str, dict[str, str]]

    def level(self, rule: str, environment: str | None) -> str | None:
        """The rule's level in that environment; None when the table does not list the rule."""
        row = self.levels.get(rule)
        if row is None:
            return None
        env = environment if environment in row else self.unknown_environment
        return row[env]

    def strictest(self, rule: str) -> str | None:
        row = self.levels.get(rule)
        if row is None:
            return None
        return "mandatory" if "mandatory" in row.values() else "advisory"


@cache
def load(path: Path = TABLE_FILE) -> Table:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    levels = data.get("levels") or {}
    for rule, row in levels.items():
        if not isinstance(row, dict) or set(row) != set(ENVIRONMENTS):
            raise ValueError(f"{path}: {rule} must give a level for each of {list(ENVIRONMENTS)}")
        bad = {v for v in row.values() if v not in LEVELS}
        if bad:
            raise ValueError(f"{path}: {rule} has level(s) {sorted(bad)}; use {list(LEVELS)}")
    unknown = str(data.get("unknown_environment", "prod"))
    if unknown not in ENVIRONMENTS:
        raise ValueError(f"{path}: unknown_environment {unknown!r} is not one of {list(ENVIRONMENTS)}")
    return Table(unknown, {str(k): {str(e): str(v) for e, v in row.items()} for k, row in levels.items()})
