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
UNVERIFIED_MARK = "[title unverified]"
# What a catalogue source must say so a reviewer can find it again: where (a repository at a commit and the file,
# or a URL, or how it was reached) and when it was read.
SOURCE_WHERE = (("repository", "commit", "file"), ("url",), ("read_via",))


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
        """The reference's official title from the catalogue ('' if it is not catalogued). A title no stored
        source confirmed (the framework's `unverified` list) says so, so every writer that prints it shows it."""
        entry = self.catalogue.get(key, {})
        title = str(entry.get("refs", {}).get(ref, ""))
        return f"{title} {UNVERIFIED_MARK}" if title and ref in (entry.get("unverified") or []) else title

    def sources_of(self, key: str, ref: str) -> list[str]:
        """The names of the catalogue sources the reference's title was checked against ([] if unverified)."""
        entry = self.catalogue.get(key, {})
        if ref in (entry.get("unverified") or []):
            return []
        return [name for name, refs in (entry.get("checked") or {}).items() if refs == "*" or ref in refs]

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
    for key in FRAMEWORK_KEYS:
        if key != "ens":  # ENS records its sources per Anexo II row (ens.annex_ii, checked by ens_levels)
            check_provenance(key, catalogue.get(key) or {}, str(catalogue_path))
    return Mapping(
        frameworks, rules, catalogue, ens_levels.parse(catalogue.get("ens") or {}, str(catalogue_path))
    )


def check_provenance(key: str, entry: dict[str, Any], where: str) -> None:
    """Every title of the framework is either checked against a named source or listed as `unverified`;
    ValueError saying what to fix."""
    at = f"{where}: {key}"
    refs = set(entry.get("refs") or {})
    sources = entry.get("sources")
    if not isinstance(sources, dict) or not sources:
        raise ValueError(f"{at}: needs `sources` (what the titles were checked against, where and when read)")
    for name, src in sources.items():
        if not isinstance(src, dict) or not src.get("read") or not src.get("title"):
            raise ValueError(f"{at}.sources.{name}: needs `title` and `read` (the date it was read)")
        if not any(all(src.get(f) for f in fields) for fields in SOURCE_WHERE):
            raise ValueError(
                f"{at}.sources.{name}: say where it is: repository + commit + file, url, or read_via"
            )
    unverified = entry.get("unverified") or []
    checked = entry.get("checked") or {}
    if not isinstance(unverified, list) or not isinstance(checked, dict):
        raise ValueError(f"{at}: `unverified` is a list of refs, `checked` maps a source to its refs or '*'")
    covered: set[str] = set()
    for name, listed in checked.items():
        if name not in sources:
            raise ValueError(f"{at}.checked: {name!r} is not one of its sources {sorted(sources)}")
        listed_refs = refs - set(unverified) if listed == "*" else set(listed)
        if stray := sorted(listed_refs - refs):
            raise ValueError(f"{at}.checked.{name}: not catalogued refs {stray}")
        covered |= listed_refs
    if stray := sorted(set(unverified) - refs):
        raise ValueError(f"{at}.unverified: not catalogued refs {stray}")
    if both := sorted(covered & set(unverified)):
        raise ValueError(f"{at}: {both} are both checked and unverified; keep one")
    if missing := sorted(refs - covered - set(unverified)):
        raise ValueError(f"{at}: {missing} name no source; add them to `checked` or to `unverified`")
