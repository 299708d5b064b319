"""The SBOM lists what a security review scans: the image's OS packages (dpkg) and its Triton server,
beside its Python packages, in CycloneDX 1.6 that passes the strict schema.

The integration test reads the real local serving base (cached in buildah's storage by the image
builds; built once if it is not) and compares with dpkg's own answer inside the image.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from containers import os_packages, sbom
from containers.errors import ContainerError

STATUS = """\
Package: libc6
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Source: glibc
Version: 2.36-9+deb12u14
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 .
 the system.

Package: libc6
Status: install ok installed
Architecture: i386
Source: glibc
Version: 2.36-9+deb12u14

Package: libssl3
Status: deinstall ok config-files
Architecture: amd64
Source: openssl
Version: 3.0.15-1~deb12u1

Package: python3
Status: install ok installed
Architecture: amd64
Source: python3-defaults (3.11.2-1)
Version: 3.11.2-1+b1
"""


def test_dpkg_status_gives_what_is_on_disk_with_purls() -> None:
    packages = os_packages.parse_status([STATUS])
    assert [(p.name, p.arch) for p in packages] == [
        ("libc6", "amd64"),
        ("libc6", "i386"),
        ("python3", "amd64"),
    ]
    python3 = packages[-1]
    assert (python3.source, python3.source_version) == ("python3-defaults", "3.11.2-1")
    assert os_packages.deb_purl(packages[0], "debian") == "pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=amd64"


def test_later_dpkg_records_replace_earlier_ones() -> None:
    """status.d/* (distroless, no Status field) and updates/* come after status, as dpkg reads them."""
    removed = "Package: python3\nStatus: purge ok not-installed\nArchitecture: amd64\nVersion: 3.11.2-1+b1\n"
    distroless = "Package: tzdata\nArchitecture: all\nVersion: 2024b-0+deb12u1\n"
    names = [p.name for p in os_packages.parse_status([STATUS, distroless, removed])]
    assert names == ["libc6", "libc6", "tzdata"]


def test_os_and_triton_components_pass_the_strict_schema(tmp_path: Path) -> None:
    inventory = {
        "packages": ["numpy==2.3.4"],
        "dpkg": [STATUS],
        "os_release": 'PRETTY_NAME="Ubuntu 24.04.3 LTS"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n',
        "triton": {"version": "2.61.0", "source": "/opt/tritonserver/TRITON_VERSION", "container": "26.08"},
    }
    bom = json.loads(
        sbom.write_sbom(inventory, tmp_path / "serving.cdx.json", epoch="1700000000").read_text()
    )
    by_name = {c["name"]: c for c in bom["components"]}
    assert by_name["ubuntu"]["type"] == "operating-system" and by_name["ubuntu"]["version"] == "24.04"
    assert by_name["python3"]["purl"] == "pkg:deb/ubuntu/python3@3.11.2-1%2Bb1?arch=amd64"
    triton = by_name["tritonserver"]
    assert triton["purl"] == "pkg:github/triton-inference-server/server@v2.61.0"
    assert {"name": "eu.ml-platform:nvidia-container-release", "value": "26.08"} in triton["properties"]
    assert by_name["numpy"]["version"] == "2.3.4"


def test_a_triton_without_a_readable_version_is_refused(tmp_path: Path) -> None:
    inventory = {"packages": ["numpy==2.3.4"], "triton": {"version": None, "source": "/opt/x/tritonserver"}}
    with pytest.raises(ContainerError, match="TRITON_VERSION"):
        sbom.write_sbom(inventory, tmp_path / "serving.cdx.json")


def _dpkg_query(ref: str) -> dict[str, tuple[str, str]]:
    from containers.smoke import WorkingContainer

    fmt = "${Package}\t${Version}\t${Architecture}\t${db:Status-Abbrev}\n"
    with WorkingContainer(ref) as ctr:
        proc = ctr.run(["dpkg-query", "-W", "-f", fmt], timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    return {name: (version, arch) for name, version, arch, state in rows if state.startswith("ii")}


@pytest.mark.integration
def test_sbom_of_the_local_serving_base_matches_dpkg_and_names_triton(tmp_path: Path) -> None:
    from containers import localbase

    if os.geteuid() != 0 or shutil.which("buildah") is None or shutil.which("debootstrap") is None:
        pytest.skip("the local base needs root, buildah and debootstrap")
    ref = localbase.ensure("serving").ref
    bom = json.loads(sbom.write_sbom(sbom.inventory_buildah(ref), tmp_path / "base.cdx.json").read_text())
    debs = {c["name"]: c for c in bom["components"] if c.get("purl", "").startswith("pkg:deb/")}
    installed = _dpkg_query(ref)
    assert set(debs) == set(installed)
    for name, (version, arch) in installed.items():
        assert debs[name]["version"] == version
        assert debs[name]["purl"].endswith(f"?arch={arch}")
    assert {"libc6", "python3", "libpython3.11"} <= set(debs)
    (system,) = [c for c in bom["components"] if c["type"] == "operating-system"]
    assert (system["name"], system["version"]) == ("debian", "12")
    (triton,) = [c for c in bom["components"] if c["name"] == "tritonserver"]
    assert triton["version"] == "2.51.0"  # the server nvidia-pytriton 0.7.0 bundles
