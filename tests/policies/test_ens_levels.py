"""ENS Anexo II per-category applicability (catalogue ens.annex_ii, policies/ens_levels.py): the data is
complete and valid, each row names where it was read, the values are the ones the sources print, and the
report states them for the category a stack is assessed at."""

from __future__ import annotations

import copy
import re
from types import SimpleNamespace

import pytest

from policies import ens_levels
from policies.frameworks import load
from policies.rules import BY_NAME
from policies.writers.signoff import ens_level, references_md


def test_every_catalogued_measure_has_a_row_and_every_row_is_catalogued() -> None:
    m = load()
    assert set(m.ens_levels.measures) == set(m.catalogue["ens"]["refs"])
    assert len(m.ens_levels.measures) == 73  # RD 311/2022 Anexo II has 73 measures


def test_every_cell_is_in_the_allowed_set_and_every_row_names_its_sources() -> None:
    lv = load().ens_levels
    allowed = re.compile(r"n\.a\.|aplica|\+ (R\d+|\[R\d+( o R\d+)+\])( \+ (R\d+|\[R\d+( o R\d+)+\]))*")
    for ref, row in lv.measures.items():
        assert set(row.cells) == set(ens_levels.CATEGORIES), ref
        assert all(allowed.fullmatch(c) for c in row.cells.values()), (ref, row.cells)
        assert set(row.by) <= set(ens_levels.DIMENSIONS), ref
        assert row.sources and set(row.sources) <= set(lv.sources), ref
    for name, src in lv.sources.items():  # each source says what it is, where and when it was read
        assert src["title"] and src["read"], name
        assert src.get("read_via") or re.fullmatch(r"[0-9a-f]{40}", src["commit"]), name


def test_values_are_the_cells_the_sources_print() -> None:
    # Literal cells of the Anexo II table as CCN-STIC 888, opos_gsi and (ALTA only) CCN-STIC 886 print them.
    lv = load().ens_levels
    expect = {
        "op.nub.1": ((), ("aplica", "+ R1", "+ R1 + R2")),
        "op.cont.2": (("D",), ("n.a.", "n.a.", "aplica")),
        "mp.si.2": (("C", "I"), ("n.a.", "aplica", "+ R1 + R2")),
        "op.exp.8": (("T",), ("aplica", "+ R1 + R2 + R3 + R4", "+ R1 + R2 + R3 + R4 + R5")),
        "op.acc.6": (
            ("C", "I", "T", "A"),
            (
                "+ [R1 o R2 o R3 o R4] + R8 + R9",
                "+ [R1 o R2 o R3 o R4] + R5 + R8 + R9",
                "+ [R1 o R2 o R3 o R4] + R5 + R6 + R7 + R8 + R9",
            ),
        ),
        "op.ext.3": ((), ("n.a.", "n.a.", "aplica")),
        "mp.s.4": (("D",), ("n.a.", "aplica", "+ R1")),
    }
    for ref, (by, cells) in expect.items():
        row = lv.measures[ref]
        assert (row.by, tuple(row.cells[c] for c in ens_levels.CATEGORIES)) == (by, cells), ref
    # Where the sources differ the row keeps the reading two of three share, and says so (shown in the report).
    assert [r for r, row in lv.measures.items() if row.disputed] == ["op.exp.2", "op.exp.8", "mp.si.5"]
    assert (
        lv.measures["mp.si.5"].cells["ALTA"] == "+ R1"
    )  # opos_gsi and CCN-STIC 886; CCN-STIC 888: + R1 + R2
    assert lv.measures["op.exp.2"].cells["ALTA"] == "aplica"  # CCN-STIC 888 and opos_gsi; CCN-STIC 886: + R1
    assert "sources differ: ALTA: CCN-STIC 888 prints + R1 + R2" in lv.describe("mp.si.5")


# Prowler's ENS file (prowler-cloud/prowler@0de111837dbbc623079816677a42d89504683496,
# prowler/compliance/aws/ens_rd2022_aws.json, a "Categoría Alta" profile) gives these measures a requisito at
# Nivel alto: a third source, so each must apply at ALTA (the ALTO column, for those by dimension).
PROWLER_ALTA_REQUISITO = [
    "op.pl.4",
    "op.acc.1",
    "op.acc.2",
    "op.acc.3",
    "op.acc.4",
    "op.acc.6",
    "op.exp.1",
    "op.exp.4",
    "op.exp.6",
    "op.exp.7",
    "op.exp.8",
    "op.exp.10",
    "op.cont.2",
    "op.mon.1",
    "op.mon.2",
    "op.mon.3",
    "mp.com.1",
    "mp.com.2",
    "mp.com.3",
    "mp.com.4",
    "mp.si.2",
    "mp.s.1",
    "mp.s.2",
    "mp.s.4",
]


def test_the_alta_profile_of_a_third_source_agrees() -> None:
    lv = load().ens_levels
    assert all(lv.measures[ref].cells["ALTA"] != ens_levels.NOT_APPLICABLE for ref in PROWLER_ALTA_REQUISITO)


def test_applicability_per_category() -> None:
    lv = load().ens_levels
    assert lv.applicable("op.nub.1", "MEDIA") == "applies + R1"  # by category: the MEDIA cell
    assert lv.applicable("op.ext.3", "MEDIA") == "not applicable (n.a.)"
    # By dimension: a MEDIA system may hold D at BAJO or MEDIO, and the table has n.a. / aplica there.
    assert lv.applicable("mp.s.4", "MEDIA") == "by the level of D: BAJO not applicable (n.a.); MEDIO applies"
    assert lv.applicable("mp.s.4", "BASICA") == "not applicable (n.a.)"  # BÁSICA: every dimension BAJO
    assert lv.applicable("op.cont.2", "MEDIA") == "not applicable (n.a.)"  # BAJO and MEDIO cells agree
    # A measure without a row is "not stated", never "not applicable".
    assert ens_levels.EnsLevels().applicable("op.nub.1", "MEDIA") == ens_levels.NOT_STATED
    with pytest.raises(ValueError, match="use one of"):
        lv.applicable("op.nub.1", "MEDIO")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"op.nub.1": {"by": "Categoría", "cells": ["aplica", "++", "+ R1"], "src": ["ccn888"]}},
            "cells ['++']",
        ),
        (
            {"op.nub.1": {"by": "Categoría", "cells": ["aplica", "aplica"], "src": ["ccn888"]}},
            "must be the 3",
        ),
        ({"op.nub.1": {"by": "X", "cells": ["aplica"] * 3, "src": ["ccn888"]}}, "by 'X'"),
        ({"op.nub.1": {"by": "Categoría", "cells": ["aplica"] * 3}}, "src []"),
        ({"op.nub.1": {"by": "Categoría", "cells": ["aplica"] * 3, "src": ["memory"]}}, "src ['memory']"),
        ({"op.nub.9": {"by": "Categoría", "cells": ["aplica"] * 3, "src": ["ccn888"]}}, "not a catalogued"),
    ],
)
def test_bad_rows_are_rejected(change: dict, message: str) -> None:
    ens = copy.deepcopy(load().catalogue["ens"])
    ens["annex_ii"]["measures"].update(change)
    with pytest.raises(ValueError, match=re.escape(message)):
        ens_levels.parse(ens, "catalogue.yaml")


def test_a_source_must_say_where_it_was_read() -> None:
    ens = copy.deepcopy(load().catalogue["ens"])
    ens["annex_ii"]["sources"]["ccn886"]["columns"] = ["ALTO"]
    with pytest.raises(ValueError, match="columns from"):
        ens_levels.parse(ens, "catalogue.yaml")
    ens["annex_ii"]["sources"]["ccn886"]["columns"] = ["ALTA"]
    ens["annex_ii"]["sources"]["opos_gsi"]["commit"] = "main"
    with pytest.raises(ValueError, match="40-hex commit"):
        ens_levels.parse(ens, "catalogue.yaml")
    del ens["annex_ii"]["sources"]["ccn888"]["read_via"]
    with pytest.raises(ValueError, match="repository\\+commit\\+file or read_via"):
        ens_levels.parse(ens, "catalogue.yaml")


def _report(category: str) -> SimpleNamespace:
    """The parts of a Report the references section reads: one stack, every rule evaluated on one resource."""
    control = SimpleNamespace(evaluated=["urn:x"], failing=[], undetermined=[], waived=[])
    return SimpleNamespace(
        mapping=load(), ens_category={"prod": category}, controls={r: {"prod": control} for r in BY_NAME}
    )


def test_report_for_a_media_stack_states_the_anexo_ii_levels() -> None:
    report = _report("MEDIA")
    assert ens_level(report, "op.nub.1") == (  # type: ignore[arg-type]
        "Anexo II (by category): BASICA aplica, MEDIA + R1, ALTA + R1 + R2; at MEDIA: applies + R1"
    )
    md = "\n".join(references_md(report))  # type: ignore[arg-type]
    # mp.si.2 (encryption at rest) is mapped; its row shows the table's cells and what MEDIA means for it.
    row = next(line for line in md.splitlines() if line.startswith("| mp.si.2 |"))
    assert "Criptografía (Anexo II (by dimension C I): BAJO n.a., MEDIO aplica, ALTO + R1 + R2; " in row
    assert "at MEDIA: by the level of C I: BAJO not applicable (n.a.); MEDIO applies)" in row
    assert "not stated by source" not in md
    header = next(line for line in md.splitlines() if line.startswith("| reference | title |"))
    assert row.count("|") == header.count("|")  # the level text adds no Markdown cell
