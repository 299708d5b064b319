"""The reference catalogue (policies/catalogue.yaml) says where each title comes from: every entry of every
framework is checked against a named, dated source or explicitly marked unverified, and the report shows which."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path

import pytest
import yaml

from policies.frameworks import CATALOGUE_FILE, FRAMEWORK_KEYS, UNVERIFIED_MARK, check_provenance, load

NON_ENS = [k for k in FRAMEWORK_KEYS if k != "ens"]


def _catalogue() -> dict:
    return yaml.safe_load(Path(CATALOGUE_FILE).read_text(encoding="utf-8"))


@pytest.mark.parametrize("key", NON_ENS)
def test_every_entry_names_a_source_or_is_unverified(key: str) -> None:
    m = load()
    entry = m.catalogue[key]
    unverified = set(entry.get("unverified") or [])
    nameless = [ref for ref in entry["refs"] if not m.sources_of(key, ref) and ref not in unverified]
    assert nameless == []
    for ref in entry["refs"]:
        for name in m.sources_of(key, ref):
            src = entry["sources"][name]
            # Read on the day the catalogue was checked, or later for references added since (ISO date).
            assert dt.date.fromisoformat(src["read"]) >= dt.date(2026, 12, 3)
            assert (src.get("repository") and src.get("commit") and src.get("file")) or src.get("url")


def test_every_ens_entry_names_its_sources() -> None:
    ens = load().catalogue["ens"]
    table = ens["annex_ii"]
    assert all(src.get("read") for src in table["sources"].values())
    assert {ref for ref, row in table["measures"].items() if row.get("src")} == set(ens["refs"])


def test_iso_27001_annex_a_is_the_93_controls() -> None:
    refs = list(load().catalogue["iso27001"]["refs"])
    expected = [
        f"{theme}.{n}" for theme, count in ((5, 37), (6, 8), (7, 14), (8, 34)) for n in range(1, count + 1)
    ]
    assert refs == expected


def test_unverified_titles_say_so_in_the_report() -> None:
    m = load()
    assert UNVERIFIED_MARK not in m.title("cis", "EKS 5.4.1")  # checked against kube-bench eks-1.5.0
    m.catalogue["cis"]["unverified"] = ["EKS 5.4.1"]  # a title no source confirmed says so
    assert m.title("cis", "EKS 5.4.1").endswith(UNVERIFIED_MARK)
    assert UNVERIFIED_MARK not in m.title("cis", "AWS 3.2")
    assert m.title("iso27001", "8.1") == "User end point devices"


def test_checked_titles_are_the_sources_wording() -> None:
    """Spot checks of titles corrected against the sources on 2026-12-03 (see the catalogue's sources)."""
    m = load()
    assert m.title("nis2", "21(2)(j)").startswith("The use of multi-factor authentication")
    assert m.title("nis2_ir", "4") == "Business continuity and crisis management"
    assert m.title("gdpr", "44") == "General principle for transfers"
    assert m.title("cis", "GCP 2.1") == "Ensure That Cloud Audit Logging Is Configured Properly"
    # CIS Azure v2.1.0 renumbered: 1.23 is resource locks (custom admin roles is 1.22), 3.7 is public network access
    assert m.title("cis", "Azure 1.23").endswith("Administering Resource Locks")
    assert m.title("cis", "Azure 3.17") == "Ensure that `Allow Blob Anonymous Access` is set to `Disabled`"
    # CIS GKE v1.6.0: 5.6.7 is Google-managed SSL certificates; network policy is 4.3.1/4.3.2 (kube-bench gke-1.6.0)
    assert "GKE 5.6.7" not in m.references("cluster-network-policy", "cis")
    assert {"GKE 4.3.1", "GKE 4.3.2"} <= set(m.references("cluster-network-policy", "cis"))
    assert m.title("cis", "Kubernetes 5.3.2") == "Ensure that all Namespaces have NetworkPolicies defined"


def test_cis_versions_checked_name_a_source() -> None:
    cis = load().catalogue["cis"]
    assert set(cis["versions_checked"]) == set(cis["versions"])  # every benchmark version cited has a source
    assert set(cis["versions_checked"].values()) <= set(cis["sources"])


def _broken(key: str, edit) -> dict:
    entry = copy.deepcopy(_catalogue()[key])
    edit(entry)
    return entry


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda e: e["checked"].pop("kube_bench_eks"), "name no source"),
        (lambda e: e["unverified"].append("AWS 3.2"), "both checked and unverified"),
        (lambda e: e["sources"]["prowler_aws"].pop("commit"), "say where it is"),
        (lambda e: e["sources"]["prowler_aws"].pop("read"), "needs `title` and `read`"),
        (lambda e: e["checked"].update(nowhere="*"), "not one of its sources"),
        (lambda e: e["unverified"].append("AWS 9.99"), "not catalogued refs"),
        (lambda e: e.pop("sources"), "needs `sources`"),
    ],
)
def test_provenance_gaps_are_errors(edit, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        check_provenance("cis", _broken("cis", edit), "catalogue.yaml")


def test_the_vendored_catalogue_passes_its_own_check() -> None:
    cat = _catalogue()
    for key in NON_ENS:
        check_provenance(key, cat[key], "catalogue.yaml")
