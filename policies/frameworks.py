"""Load the rule -> regulation mapping (policies/frameworks.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

MAPPING_FILE = Path(__file__).with_name("frameworks.yaml")
FRAMEWORK_KEYS = ("gdpr", "ens", "nis2", "iso27001", "cis")


@dataclass(frozen=True)
class Framework:
    key: str
    name: str
    version: str
    reference: str


@dataclass(frozen=True)
class Mapping:
    frameworks: dict[str, Framework]
    rules: dict[str, dict[str, Any]]

    def references(self, rule: str, key: str) -> list[str]:
        return [str(x) for x in self.rules.get(rule, {}).get(key, [])]

    def primary(self, rule: str) -> Framework:
        return self.frameworks[self.rules[rule]["primary"]]

    def specification(self, rule: str) -> str:
        """'GDPR 44, 45; ENS op.nub.1; ...' for the policy's framework.specification field."""
        parts = []
        for key in FRAMEWORK_KEYS:
            refs = self.references(rule, key)
            if refs:
                parts.append(f"{self.frameworks[key].name} {', '.join(refs)}")
        return "; ".join(parts)


@cache
def load(path: Path = MAPPING_FILE) -> Mapping:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    frameworks = {
        k: Framework(k, v["name"], str(v["version"]), v["reference"]) for k, v in data["frameworks"].items()
    }
    rules = data["rules"]
    for name, entry in rules.items():
        if entry.get("primary") not in frameworks:
            raise ValueError(
                f"{path}: rule {name} has primary {entry.get('primary')!r}; use one of {sorted(frameworks)}"
            )
    return Mapping(frameworks, rules)
