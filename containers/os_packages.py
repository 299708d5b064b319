"""The operating system half of an image's SBOM: its Debian/Ubuntu packages and its Triton server.

Most CVEs in a container land in the OS packages (openssl, libc, ...), which the Python inventory
cannot see. `sbom.INVENTORY_SCRIPT` copies the raw dpkg database and /etc/os-release out of the
image (the same run that lists its Python packages); this module turns them into CycloneDX
components with purl-spec `deb` purls (`pkg:deb/<vendor>/<name>@<version>?arch=<arch>`).

The dpkg database is deb822 (RFC 822-style paragraphs). python-debian, the maintained parser of
that format, is not in requirements/lock.txt; the standard library's email header parser reads the
same fields, continuation lines included, so the lock stays as it is.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from email.parser import HeaderParser
from typing import Any

from containers.errors import ContainerError

# dpkg's "want flag state" triple: a package whose state is one of these has no files on disk
# (removed, or only its configuration files kept), so it is not in the image.
_NOT_ON_DISK = ("not-installed", "config-files")
# `Source: glibc (2.36-9)`: the source package, and its version when it differs from the binary's.
_SOURCE = re.compile(r"^(?P<name>\S+)(?:\s+\((?P<version>[^)]+)\))?$")


@dataclass(frozen=True, slots=True)
class DebPackage:
    name: str
    version: str
    arch: str
    source: str
    source_version: str


def parse_status(texts: list[str]) -> list[DebPackage]:
    """Installed packages of dpkg database files, in the order dpkg reads them (status, then
    status.d/* as distroless images keep it, then updates/*): a later record of the same package
    and architecture replaces an earlier one."""
    found: dict[tuple[str, str], DebPackage | None] = {}
    parser = HeaderParser()
    for text in texts:
        for paragraph in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n")):
            if not paragraph.strip():
                continue
            fields = parser.parsestr(paragraph.strip() + "\n")
            name, version = fields.get("Package"), fields.get("Version")
            if not name or not version:
                continue
            arch = (fields.get("Architecture") or "").strip()
            status = (fields.get("Status") or "install ok installed").split()
            key = (name.strip(), arch)
            if status[-1] in _NOT_ON_DISK:
                found[key] = None
                continue
            source = _SOURCE.match((fields.get("Source") or name).strip())
            found[key] = DebPackage(
                name=name.strip(),
                version=version.strip(),
                arch=arch,
                source=source.group("name") if source else name.strip(),
                source_version=(source.group("version") if source else None) or version.strip(),
            )
    return sorted((p for p in found.values() if p is not None), key=lambda p: (p.name, p.arch))


def parse_os_release(text: str | None) -> dict[str, str]:
    """KEY=value lines of os-release(5), values shell-quoted."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            words = shlex.split(value, comments=False, posix=True) if value else [""]
            out[key] = words[0] if words else ""
    return out


def _vendor(os_release: dict[str, str]) -> str:
    """purl-spec `deb` namespace: the distribution's vendor (debian, ubuntu), lowercased."""
    candidates = [os_release.get("ID", ""), *os_release.get("ID_LIKE", "").split()]
    return next((c.lower() for c in candidates if c), "debian")


def deb_purl(package: DebPackage, vendor: str) -> str:
    from packageurl import PackageURL
    from packageurl.validate import DebTypeDefinition

    qualifiers = {"arch": package.arch} if package.arch else {}
    purl = PackageURL(
        type="deb",
        namespace=vendor,
        name=package.name.lower(),
        version=package.version,
        qualifiers=qualifiers,
    )
    problems = [m.message for m in DebTypeDefinition.validate(purl, strict=True)]
    if problems:
        raise ContainerError(f"purl of the deb package {package.name}: {'; '.join(problems)}")
    return str(purl)


def components(inventory: dict[str, Any]) -> list[dict[str, Any]]:
    """CycloneDX components for the OS, each installed deb, and tritonserver when the image has it."""
    os_release = parse_os_release(inventory.get("os_release"))
    packages = parse_status(list(inventory.get("dpkg") or []))
    out: list[dict[str, Any]] = []
    if os_release.get("ID"):
        # Scanners (Trivy, Grype) match deb packages against the advisories of this release.
        system: dict[str, Any] = {"type": "operating-system", "bom-ref": "os", "name": os_release["ID"]}
        if os_release.get("VERSION_ID"):
            system["version"] = os_release["VERSION_ID"]
        if os_release.get("PRETTY_NAME"):
            system["description"] = os_release["PRETTY_NAME"]
        out.append(system)
    vendor = _vendor(os_release)
    for package in packages:
        purl = deb_purl(package, vendor)
        # Debian's security tracker and Ubuntu's USNs are keyed by source package.
        properties = [{"name": "eu.ml-platform:deb:source", "value": package.source}]
        if package.source_version != package.version:
            properties.append({"name": "eu.ml-platform:deb:source-version", "value": package.source_version})
        out.append(
            {
                "type": "library",
                "bom-ref": purl,
                "name": package.name,
                "version": package.version,
                "purl": purl,
                "properties": properties,
            }
        )
    triton = inventory.get("triton")
    if triton:
        out.append(triton_component(triton))
    return out


def triton_component(triton: dict[str, Any]) -> dict[str, Any]:
    version = triton.get("version")
    if not version:
        raise ContainerError(
            f"the image has tritonserver ({triton.get('source')}) but its version could not be read: "
            "write it to /opt/tritonserver/TRITON_VERSION in the base, as NVIDIA's images do"
        )
    from packageurl import PackageURL

    properties = [{"name": "eu.ml-platform:version-source", "value": str(triton.get("source"))}]
    if triton.get("container"):
        # NVIDIA's security bulletins name the container release (26.08), not the server's version.
        properties.append(
            {"name": "eu.ml-platform:nvidia-container-release", "value": str(triton["container"])}
        )
    return {
        "type": "application",
        "bom-ref": "tritonserver",
        "supplier": {"name": "NVIDIA Corporation"},
        "name": "tritonserver",
        "version": str(version),
        # Triton's release tags are v<version> in triton-inference-server/server.
        "purl": str(
            PackageURL(
                type="github", namespace="triton-inference-server", name="server", version=f"v{version}"
            )
        ),
        "properties": properties,
    }
