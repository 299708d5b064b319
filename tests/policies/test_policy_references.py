"""The references a reviewer can check: every mapped reference exists in the vendored catalogue with its
title, every mapping line says why, and the corrections of issue 12 hold."""

from __future__ import annotations

import re

import pytest

from policies.frameworks import FRAMEWORK_KEYS, load
from policies.rules import ALL_RULES


def test_every_mapped_reference_is_in_the_catalogue() -> None:
    assert load().missing() == []


def test_every_mapping_line_says_why() -> None:
    m = load()
    empty = [
        f"{rule}: {key} {ref}"
        for rule in m.rules
        for key in FRAMEWORK_KEYS
        for ref in m.references(rule, key)
        if len(m.why(rule, key, ref).split()) < 2
    ]
    assert empty == []


def test_catalogue_is_complete_where_it_claims_to_be() -> None:
    cat = load().catalogue
    assert len(cat["iso27001"]["refs"]) == 93  # ISO/IEC 27001:2022 Annex A
    assert list(cat["nis2"]["refs"]) == [f"21(2)({c})" for c in "abcdefghij"]
    assert len(cat["ens"]["refs"]) == 73  # RD 311/2022 Anexo II measures
    assert set(cat["cis"]["versions"]) >= {"AWS", "GCP", "Azure", "EKS", "GKE", "Kubernetes"}


def test_missing_reference_is_caught() -> None:
    m = load()
    rules = {**m.rules, "x": {"primary": "ens", "ens": {"mp.info.99": "made up"}}}
    assert type(m)(m.frameworks, rules, m.catalogue).missing() == ["x: ens mp.info.99"]


@pytest.mark.parametrize(
    ("rule", "key", "absent"),
    [
        ("encryption-at-rest-cmk", "ens", "mp.info.3"),  # electronic signature, not encryption at rest
        ("s3-bucket-cmk-encryption", "ens", "mp.info.3"),
        ("bucket-lifecycle", "ens", "mp.info.6"),  # backups, not lifecycle
        ("bucket-access-logging", "gdpr", "30"),  # records of processing, not logging evidence
        ("audit-trail-enabled", "gdpr", "30"),
        ("cluster-endpoint-restricted", "nis2", "21(2)(j)"),  # MFA and secured communications
        ("azure-public-network-access-disabled", "nis2", "21(2)(j)"),
        ("eu-data-residency", "gdpr", "45"),  # residency is art. 44 evidence, not an adequacy decision
        ("eu-data-residency", "gdpr", "46"),
        ("s3-bucket-cmk-encryption", "cis", "AWS 2.1.1"),  # that id is "deny HTTP requests"
        ("kms-key-rotation", "cis", "Azure 8.6"),  # that id is Key Vault RBAC
    ],
)
def test_issue_12_corrections(rule: str, key: str, absent: str) -> None:
    assert absent not in load().references(rule, key)


def test_encryption_at_rest_maps_to_ens_cryptography() -> None:
    assert "mp.si.2" in load().references("encryption-at-rest-cmk", "ens")
    assert load().title("ens", "mp.si.2") == "Criptografía"


def test_mapping_covers_every_rule() -> None:
    assert set(load().rules) == {r.name for r in ALL_RULES}


# Mapped ENS measures the vendored source (Prowler's ENS file, ens.levels_source) gives no requisito level:
# listed there as without_requisito / not_in_source. Exactly this set may lack levels.
ENS_MAPPED_WITHOUT_LEVEL = {
    "mp.info.2",
    "mp.info.6",
    "mp.si.5",
    "mp.sw.2",
    "op.exp.2",
    "op.exp.3",
    "op.exp.5",
    "op.nub.1",
}


def test_every_mapped_ens_measure_has_levels_or_is_listed_without() -> None:
    m = load()
    mapped = {ref for rule in m.rules for ref in m.references(rule, "ens")}
    without = {ref for ref in mapped if not m.ens_levels.describe(ref).startswith("requisito ")}
    assert without == ENS_MAPPED_WITHOUT_LEVEL
    assert without <= m.ens_levels.without_level  # and the catalogue's source note lists each of them


def test_ens_levels_are_the_values_read_from_prowler() -> None:
    lv = load().ens_levels
    assert lv.source["commit"] == "0de111837dbbc623079816677a42d89504683496"
    assert lv.source["file"] == "prowler/compliance/aws/ens_rd2022_aws.json"
    # Literal values of that file: mp.si.2 requisito Nivel alto, refuerzos r1 (Productos certificados) and
    # r2 (Copias de seguridad) alto; op.acc.3.r2 (Privilegios de auditoría) Nivel opcional; op.exp.8.r1/r3/r4.
    assert lv.measures["mp.si.2"].requisito == ("ALTA",)
    assert lv.measures["mp.si.2"].refuerzos == {"mp.si.2.r1": "ALTA", "mp.si.2.r2": "ALTA"}
    assert lv.measures["op.acc.3"].refuerzos["op.acc.3.r2"] == "OPCIONAL"
    assert set(lv.measures["op.exp.8"].refuerzos) == {"op.exp.8.r1", "op.exp.8.r3", "op.exp.8.r4"}


def test_ens_applicability_never_reads_silence_as_not_applicable() -> None:
    lv = load().ens_levels
    assert lv.applicable("mp.si.2", "ALTA") == "applicable"
    # The source is a Categoría Alta profile: it says nothing about MEDIA, which is not "not applicable".
    assert lv.applicable("mp.si.2", "MEDIA") == "not stated by source"
    assert lv.applicable("op.nub.1", "ALTA") == "not stated by source"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mp.si.2": {"requisito": ["ALTO"]}}, "levels ['ALTO']"),
        ({"mp.si.2": {"requisito": ["ALTA"], "refuerzos": {"mp.si.3.r1": "ALTA"}}}, "must be mp.si.2.rN"),
        ({"op.nub.1": {"requisito": ["ALTA"]}}, "not both"),  # also listed in not_in_source
    ],
)
def test_bad_ens_levels_are_rejected(change: dict, message: str) -> None:
    from policies import ens_levels

    ens = load().catalogue["ens"]
    with pytest.raises(ValueError, match=re.escape(message)):
        ens_levels.parse({**ens, "levels": {**ens["levels"], **change}}, "catalogue.yaml")


def test_report_prints_ens_level_and_applicability_per_assessed_category() -> None:
    from types import SimpleNamespace

    from policies.writers.signoff import ens_level

    report = SimpleNamespace(mapping=load(), ens_category={"dev": "BASICA", "prod": "MEDIA", "x": "ALTA"})
    assert ens_level(report, "mp.si.2") == (  # type: ignore[arg-type]
        "source (ALTA profile) levels: requisito ALTA; refuerzos r1 ALTA, r2 ALTA; "
        "at BASICA: not stated by source; at MEDIA: not stated by source; at ALTA: applicable"
    )
