"""The references a reviewer can check: every mapped reference exists in the vendored catalogue with its
title, every mapping line says why, and the corrections of issue 12 hold."""

from __future__ import annotations

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


# ENS Anexo II levels per measure (catalogue ens.annex_ii): tests/policies/test_ens_levels.py.
def test_every_mapped_ens_measure_has_its_anexo_ii_row() -> None:
    m = load()
    mapped = {ref for rule in m.rules for ref in m.references(rule, "ens")}
    assert mapped and all(m.ens_levels.describe(ref).startswith("Anexo II (") for ref in mapped)
