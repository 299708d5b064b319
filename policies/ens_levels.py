"""ENS (RD 311/2022) Anexo II levels per measure, as data in policies/catalogue.yaml (`ens.levels`,
`ens.levels_source`): typed and validated once, at load.

The data comes from a vendored reading of Prowler's ENS compliance file, which is a "Categoría Alta"
profile: it says what applies at its profile category only. So `applicable()` answers "applicable" only
where the stack's category is one the source lists for the measure, and "not stated by source" elsewhere;
it never answers "not applicable" for a category the source does not cover."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("BASICA", "MEDIA", "ALTA")
LEVELS = (*CATEGORIES, "OPCIONAL")
APPLICABLE = "applicable"
NOT_STATED = "not stated by source"
NOT_REQUIRED = "not required by source"


@dataclass(frozen=True)
class MeasureLevels:
    requisito: tuple[str, ...]  # categories whose requisito entries list the measure
    refuerzos: dict[str, str]  # refuerzo id -> level


@dataclass(frozen=True)
class EnsLevels:
    source: dict[str, Any] = field(default_factory=dict)
    profile: str = ""
    measures: dict[str, MeasureLevels] = field(default_factory=dict)
    without_level: frozenset[str] = frozenset()  # listed in the source note: no requisito level

    def describe(self, ref: str) -> str:
        """'requisito ALTA; refuerzos r1 ALTA, r2 OPCIONAL' ('' where the source gives no level)."""
        lv = self.measures.get(ref)
        if lv is None:
            return ""
        parts = [f"requisito {'/'.join(lv.requisito)}"] if lv.requisito else ["no requisito"]
        if lv.refuerzos:
            parts.append(
                "refuerzos "
                + ", ".join(f"{r.removeprefix(ref + '.')} {lvl}" for r, lvl in lv.refuerzos.items())
            )
        return "; ".join(parts)

    def applicable(self, ref: str, category: str) -> str:
        """Whether the source says the measure applies at a stack's ENS category."""
        lv = self.measures.get(ref)
        if lv is None or not lv.requisito:
            return NOT_STATED
        if category in lv.requisito:
            return APPLICABLE
        # The source is a single-category profile: below it, it is silent, not negative.
        return NOT_REQUIRED if category == self.profile else NOT_STATED


def parse(data: dict[str, Any], where: str) -> EnsLevels:
    """The `ens` section of the catalogue -> EnsLevels; ValueError saying what to fix."""
    src = data.get("levels_source")
    raw = data.get("levels")
    if src is None and raw is None:
        return EnsLevels()
    if not isinstance(src, dict) or not isinstance(raw, dict):
        raise ValueError(f"{where}: ens.levels and ens.levels_source must both be mappings")
    for key in ("file", "repository", "commit", "read", "profile"):
        if not src.get(key):
            raise ValueError(f"{where}: ens.levels_source.{key} is missing (name the source you read)")
    if not re.fullmatch(r"[0-9a-f]{40}", str(src["commit"])):
        raise ValueError(f"{where}: ens.levels_source.commit must be the 40-hex commit you read")
    if src["profile"] not in CATEGORIES:
        raise ValueError(f"{where}: ens.levels_source.profile must be one of {CATEGORIES}")
    refs = set(data.get("refs") or {})
    measures: dict[str, MeasureLevels] = {}
    for ref, entry in raw.items():
        if ref not in refs:
            raise ValueError(f"{where}: ens.levels.{ref} is not a catalogued measure (add it to ens.refs)")
        entry = entry or {}
        req = tuple(entry.get("requisito") or ())
        refz = {str(k): str(v) for k, v in (entry.get("refuerzos") or {}).items()}
        bad = [x for x in req if x not in CATEGORIES] + [v for v in refz.values() if v not in LEVELS]
        if bad:
            raise ValueError(
                f"{where}: ens.levels.{ref}: levels {bad}; use {LEVELS} (requisito: {CATEGORIES})"
            )
        stray = [r for r in refz if not re.fullmatch(re.escape(ref) + r"\.r\d+", r)]
        if stray:
            raise ValueError(f"{where}: ens.levels.{ref}: refuerzo ids {stray} must be {ref}.rN")
        measures[ref] = MeasureLevels(req, refz)
    without = set(src.get("without_requisito") or []) | set(src.get("not_in_source") or [])
    unknown = without - refs
    if unknown:
        raise ValueError(f"{where}: ens.levels_source lists {sorted(unknown)}, not catalogued measures")
    with_level = {r for r, m in measures.items() if m.requisito}
    both, neither = with_level & without, refs - with_level - without
    if both or neither:
        raise ValueError(
            f"{where}: every ENS measure needs requisito levels in ens.levels or a place in "
            f"ens.levels_source.without_requisito / not_in_source, not both: both {sorted(both)}, "
            f"neither {sorted(neither)}"
        )
    return EnsLevels(dict(src), str(src["profile"]), measures, frozenset(without))
