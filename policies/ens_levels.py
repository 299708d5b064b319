"""ENS (RD 311/2022) Anexo II per-category applicability of each measure, as data in policies/catalogue.yaml
(`ens.annex_ii`): typed and validated once, at load.

Each row is the Anexo II table's row for a measure: `by` (the "Categoría o dimensiones" column) and the three
cells BÁSICA / MEDIA / ALTA as printed ("n.a.", "aplica", "+ R1 + R2", "+ [R1 o R2]"), with the sources it was
read from (every source named under `ens.annex_ii.sources`, with where and when it was read, and `columns`
where it prints only some). Where the sources differ, `disputed` says who prints what; describe() shows it.

Where a measure goes by dimensions (e.g. "C I"), the columns are that dimension's level (BAJO / MEDIO / ALTO),
not the system's category: a MEDIA system may have that dimension at BAJO. `applicable()` then says which
cells are possible at the category instead of picking one. A catalogued measure without a row answers
"not stated by source", never "not applicable"."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("BASICA", "MEDIA", "ALTA")
DIMENSION_LEVELS = ("BAJO", "MEDIO", "ALTO")  # the column headings when a measure goes by dimensions
DIMENSIONS = (
    "C",
    "I",
    "T",
    "A",
    "D",
)  # confidencialidad, integridad, trazabilidad, autenticidad, disponibilidad
BY_CATEGORY = "Categoría"
NOT_APPLICABLE = "n.a."
APPLIES = "aplica"
NOT_STATED = "not stated by source"
# A cell: n.a., aplica, or refuerzos: "+ R1", "+ [R1 o R2 o R3] + R5" ([...] = one of them).
_TERM = r"(?:R\d+|\[R\d+(?: o R\d+)+\])"
_REFUERZOS = re.compile(rf"\+ {_TERM}(?: \+ {_TERM})*")


@dataclass(frozen=True)
class Row:
    by: tuple[str, ...]  # () = by category; else the dimensions whose level selects the column
    cells: dict[str, str]  # category -> cell, as printed in the table
    sources: tuple[str, ...]
    disputed: str = ""  # where the sources differ: what the other one says


@dataclass(frozen=True)
class EnsLevels:
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    measures: dict[str, Row] = field(default_factory=dict)

    def describe(self, ref: str) -> str:
        """'Anexo II (by category): BASICA aplica, MEDIA + R1, ALTA + R1', or by dimension 'BAJO n.a., MEDIO
        aplica, ALTO + R1' ('' without a row)."""
        row = self.measures.get(ref)
        if row is None:
            return ""
        by = "by category" if not row.by else f"by dimension {' '.join(row.by)}"
        heads = DIMENSION_LEVELS if row.by else CATEGORIES  # the columns are dimension levels there
        # ", " not " | ": the report puts this in a Markdown table cell.
        cells = ", ".join(f"{h} {row.cells[c]}" for h, c in zip(heads, CATEGORIES, strict=True))
        note = f" [sources differ: {row.disputed}]" if row.disputed else ""
        return f"Anexo II ({by}): {cells}{note}"

    def applicable(self, ref: str, category: str) -> str:
        """What the table requires of the measure for a system of this ENS category."""
        row = self.measures.get(ref)
        if row is None:
            return NOT_STATED
        if category not in CATEGORIES:
            raise ValueError(f"ENS category {category!r}: use one of {CATEGORIES}")
        if not row.by:
            return _say(row.cells[category])
        # The category is the highest dimension level (Anexo I), so the measure's dimensions may sit at any
        # level up to it: each of those columns is possible.
        upto = CATEGORIES[: CATEGORIES.index(category) + 1]
        possible = {row.cells[c] for c in upto}
        if len(possible) == 1:
            return _say(possible.pop())
        dims = " ".join(row.by)
        levels = "; ".join(f"{DIMENSION_LEVELS[CATEGORIES.index(c)]} {_say(row.cells[c])}" for c in upto)
        return f"by the level of {dims}: {levels}"


def _say(cell: str) -> str:
    if cell == NOT_APPLICABLE:
        return "not applicable (n.a.)"
    return "applies" if cell == APPLIES else f"applies {cell}"


def parse(data: dict[str, Any], where: str) -> EnsLevels:
    """The `ens` section of the catalogue -> EnsLevels; ValueError saying what to fix."""
    table = data.get("annex_ii")
    if table is None:
        return EnsLevels()
    if not isinstance(table, dict) or not isinstance(table.get("sources"), dict):
        raise ValueError(
            f"{where}: ens.annex_ii needs `sources` (name, title, where and when read) and `measures`"
        )
    stray = set(table) - {"sources", "measures"}
    if stray:
        raise ValueError(f"{where}: ens.annex_ii has {sorted(stray)}; rows go under ens.annex_ii.measures")
    sources: dict[str, dict[str, Any]] = table["sources"]
    for name, src in sources.items():
        src = src or {}
        missing = [k for k in ("title", "read") if not src.get(k)]
        # Where it was read: a repository file at a commit, or (a document read otherwise) how it was read.
        if not (src.get("repository") and src.get("commit") and src.get("file")) and not src.get("read_via"):
            missing.append("repository+commit+file or read_via")
        if src.get("commit") and not re.fullmatch(r"[0-9a-f]{40}", str(src["commit"])):
            missing.append("commit as the 40-hex commit read")
        if set(src.get("columns") or CATEGORIES) - set(CATEGORIES):  # a source printing only some columns
            missing.append(f"columns from {CATEGORIES}")
        if missing:
            raise ValueError(f"{where}: ens.annex_ii.sources.{name}: missing {missing} (say what you read)")
    refs = set(data.get("refs") or {})
    measures: dict[str, Row] = {}
    for ref, entry in (table.get("measures") or {}).items():
        measures[ref] = _row(ref, entry or {}, refs, set(sources), where)
    return EnsLevels(sources, measures)


def _row(ref: str, entry: dict[str, Any], refs: set[str], sources: set[str], where: str) -> Row:
    at = f"{where}: ens.annex_ii.measures.{ref}"
    if ref not in refs:
        raise ValueError(f"{at}: not a catalogued measure (add it to ens.refs)")
    by = str(entry.get("by", ""))
    dims = () if by == BY_CATEGORY else tuple(by.split())
    if by != BY_CATEGORY and (not dims or set(dims) - set(DIMENSIONS)):
        raise ValueError(f"{at}: by {by!r}; use {BY_CATEGORY!r} or dimensions from {DIMENSIONS}")
    cells = entry.get("cells")
    if not isinstance(cells, list) or len(cells) != len(CATEGORIES):
        raise ValueError(f"{at}: cells must be the {len(CATEGORIES)} cells {CATEGORIES}")
    bad = [c for c in cells if c not in (NOT_APPLICABLE, APPLIES) and not _REFUERZOS.fullmatch(str(c))]
    if bad:
        raise ValueError(f"{at}: cells {bad}; use n.a., aplica or refuerzos like '+ R1 + [R2 o R3]'")
    src = tuple(entry.get("src") or ())
    if not src or set(src) - sources:
        raise ValueError(f"{at}: src {list(src)} must name sources listed under ens.annex_ii.sources")
    return Row(
        dims, dict(zip(CATEGORIES, map(str, cells), strict=True)), src, str(entry.get("disputed") or "")
    )
