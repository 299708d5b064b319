"""The rule -> regulation mapping (policies/frameworks.yaml) and the reference catalogue
(policies/catalogue.yaml) it cites: titles, and why each reference applies to each rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from policies import ens_levels

MAPPING_FILE = Path(__file__).with_name("frameworks.yaml")
CATALOGUE_FILE = Path(__file__).with_name("catalogue.yaml")
FRAMEWORK_KEYS = ("gdpr", "ens", "nis2", "nis2_ir", "iso27001", "cis")


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
    catalogue: dict[str, dict[str, Any]]
    ens_levels: ens_levels.EnsLevels = field(default_factory=ens_levels.EnsLevels)

    def references(self, rule: str, key: str) -> list[str]:
        return [str(x) for x in (self.rules.get(rule, {}).get(key) or {})]

    def why(self, rule: str, key: str, ref: str) -> str:
        return str((self.rules.get(rule, {}).get(key) or {}).get(ref, ""))

    def title(self, key: str, ref: str) -> str:
        """The reference's official title from the catalogue ('' if it is not catalogued)."""
        return str(self.catalogue.get(key, {}).get("refs", {}).get(ref, ""))

    def primary(self, rule: str) -> Framework:
        return self.frameworks[self.rules[rule]["primary"]]

    def specification(self, rule: str) -> str:
        """'GDPR 44; ENS op.nub.1; ...' for the policy's framework.specification field."""
        parts = []
        for key in FRAMEWORK_KEYS:
            refs = self.references(rule, key)
            if refs:
                parts.append(f"{self.frameworks[key].name} {', '.join(refs)}")
        return "; ".join(parts)

    def missing(self) -> list[str]:
        """'<rule>: <framework> <ref>' for every mapped reference absent from the catalogue."""
        return [
            f"{rule}: {key} {ref}"
            for rule in self.rules
            for key in FRAMEWORK_KEYS
            for ref in self.references(rule, key)
            if not self.title(key, ref)
        ]


@cache
def load(path: Path = MAPPING_FILE, catalogue_path: Path = CATALOGUE_FILE) -> Mapping:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    catalogue = yaml.safe_load(catalogue_path.read_text(encoding="utf-8")) or {}
    frameworks = {
        k: Framework(k, v["name"], str(v["version"]), v["reference"]) for k, v in data["frameworks"].items()
    }
    rules = data["rules"]
    for name, entry in rules.items():
        if entry.get("primary") not in frameworks:
            raise ValueError(
                f"{path}: rule {name} has primary {entry.get('primary')!r}; use one of {sorted(frameworks)}"
            )
        for key in FRAMEWORK_KEYS:
            if not isinstance(entry.get(key) or {}, dict):
                raise ValueError(f"{path}: rule {name}: {key} must map each reference to why it applies")
    return Mapping(
        frameworks, rules, catalogue, ens_levels.parse(catalogue.get("ens") or {}, str(catalogue_path))
    )
