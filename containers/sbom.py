"""What Python a built image really carries: its package inventory, torch/CUDA, and a CycloneDX SBOM.

The inventory is read inside the image by the image's own interpreter (importlib.metadata over its
sys.path: the base's packages and ours), so the SBOM describes the image, not the lock we hoped
went in. `cyclonedx-py` (the CycloneDX project's generator) turns it into CycloneDX JSON. The same
run copies out the image's dpkg database, os-release and Triton version: `containers.os_packages`
adds them as components (the OS packages are where most CVEs land).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from containers import os_packages
from containers.errors import ContainerError

# Runs in the image: every distribution on its sys.path, and torch's own CUDA build if importable.
INVENTORY_SCRIPT = """
import importlib.metadata as md, json, sys
dists = {}
for d in md.distributions():
    name = d.metadata["Name"]
    if name and name.lower() not in dists:
        dists[name.lower()] = name + "==" + d.version
torch = cuda = None
try:
    import torch as t
    torch, cuda = t.__version__, t.version.cuda
except Exception:
    pass
import glob, os, re, shutil, subprocess
def text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None
# dpkg's own reading order: status, distroless's status.d/*, then pending updates/* (newer).
paths = ["/var/lib/dpkg/status"] + sorted(glob.glob("/var/lib/dpkg/status.d/*"))
paths += sorted(glob.glob("/var/lib/dpkg/updates/[0-9]*"))
dpkg = [s for s in (text(p) for p in paths if not p.endswith(".md5sums")) if s]
triton = None
exe = shutil.which("tritonserver") or "/opt/tritonserver/bin/tritonserver"
if os.path.exists("/opt/tritonserver/TRITON_VERSION"):  # NVIDIA's images
    triton = {"version": text("/opt/tritonserver/TRITON_VERSION").strip(),
              "source": "/opt/tritonserver/TRITON_VERSION"}
elif os.path.exists(exe):
    # nvidia-pytriton's bundle (the local base) has no version file: the server's own startup
    # table says it. A missing model repository makes it exit before it opens any port.
    try:
        out = subprocess.run([exe, "--model-repository=/nonexistent", "--allow-http=false",
                              "--allow-grpc=false", "--allow-metrics=false"],
                             capture_output=True, text=True, timeout=120)
        found = re.search(r"[|]\\s*server_version\\s*[|]\\s*(\\S+)", out.stdout + out.stderr)
    except (OSError, subprocess.SubprocessError):
        found = None
    triton = {"version": found.group(1) if found else None, "source": exe + " (startup table)"}
if triton is not None:
    triton["container"] = os.environ.get("NVIDIA_TRITON_SERVER_VERSION")
print(json.dumps({"python": sys.version.split()[0], "packages": sorted(dists.values()),
                  "torch": torch, "cuda": cuda, "dpkg": dpkg, "triton": triton,
                  "os_release": text("/etc/os-release") or text("/usr/lib/os-release")}))
"""


def inventory_buildah(ref: str) -> dict[str, Any]:
    from containers.smoke import WorkingContainer

    with WorkingContainer(ref) as ctr:
        proc = ctr.run(["python3", "-c", INVENTORY_SCRIPT], timeout=300)
    if proc.returncode != 0:
        raise ContainerError(f"reading the Python inventory of {ref} failed: {proc.stderr[-2000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def inventory_docker(client: Any, ref: str) -> dict[str, Any]:
    from containers import docker_engine

    out = docker_engine.run_python(client, ref, INVENTORY_SCRIPT)
    return dict(json.loads(out.strip().splitlines()[-1]))


def write_sbom(
    inventory: dict[str, Any], out: Path, *, epoch: str | None = None, image: dict[str, Any] | None = None
) -> Path:
    """CycloneDX 1.6 JSON of the inventory, validated by the generator itself, plus the
    image's OS packages and Triton server (`containers.os_packages`); with `image` (a
    record entry: name, version, build_key, base_image, base_digest) the BOM names the image it
    describes and the base it was built on, by digest. The whole is validated against the strict 1.6
    schema."""
    import os

    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if epoch:
        env["SOURCE_DATE_EPOCH"] = epoch  # reproducible: the commit's time, not now
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cyclonedx_py",
            "requirements",
            "-",
            "--mc-type",
            "application",
            "--output-reproducible",
            "--validate",
            "-o",
            str(out),
        ],
        input="\n".join(inventory["packages"]) + "\n",
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if proc.returncode != 0:
        raise ContainerError(f"cyclonedx-py failed: {proc.stderr[-2000:]}")
    bom = json.loads(out.read_text())
    extra = os_packages.components(inventory)
    bom.setdefault("components", []).extend(extra)
    bom.setdefault("dependencies", []).extend({"ref": c["bom-ref"]} for c in extra)
    if image is not None:
        bom = _with_subject(bom, image)
    _validate(bom, image["name"] if image else str(out))
    out.write_text(json.dumps(bom, indent=2) + "\n")
    return out


def _validate(bom: dict[str, Any], what: str) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    errors = JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(bom))
    if errors is not None:
        raise ContainerError(f"the SBOM of {what} is not valid CycloneDX 1.6: {errors}")


def _oci_purl(ref: str, digest: str) -> str:
    """purl-spec's `oci` type: the digest is the version, where it lives a qualifier."""
    from packageurl import PackageURL

    repository = ref.partition("@")[0]
    tag = ""
    if ":" in repository.rpartition("/")[2]:
        repository, _, tag = repository.rpartition(":")
    qualifiers = {"repository_url": repository, **({"tag": tag} if tag else {})}
    return str(
        PackageURL(
            type="oci", name=repository.rpartition("/")[2].lower(), version=digest, qualifiers=qualifiers
        )
    )


def _with_subject(bom: dict[str, Any], image: dict[str, Any]) -> dict[str, Any]:
    """The image as the BOM's subject (metadata.component) and its base as a component pinned by
    digest: a BOM that does not say which image it describes cannot be checked against one. The
    image's registry digest is not known yet (a push compresses layers): the pushed digest is bound
    to this BOM by the cosign attestation, the build key here ties it to the record."""
    base_ref = "base-image"
    base_digest = str(image["base_digest"])
    bom["metadata"]["component"] = {
        "type": "container",
        "bom-ref": "image",
        "name": image["name"],
        "version": image["version"],
        "properties": [{"name": "eu.ml-platform:build-key", "value": image["build_key"]}],
    }
    bom["components"].append(
        {
            "type": "container",
            "bom-ref": base_ref,
            "name": str(image["base_image"]).partition("@")[0],
            "version": base_digest,
            "hashes": [{"alg": "SHA-256", "content": base_digest.removeprefix("sha256:")}],
            "purl": _oci_purl(str(image["base_image"]), base_digest),
        }
    )
    refs = [c["bom-ref"] for c in bom["components"]]
    bom.setdefault("dependencies", []).append({"ref": "image", "dependsOn": refs})
    bom["dependencies"].append({"ref": base_ref})
    return bom


def check_torch(inventory: dict[str, Any], expected_torch: str) -> None:
    """The training image must run the torch release the lock was made for. NVIDIA's images carry
    their own build (`2.13.0a0+...nv26.07`, CUDA), which is the point of the base: only the
    release (major.minor) must match, and a CUDA-less torch on NVIDIA's base is a broken build."""
    found = inventory.get("torch")
    if not found:
        raise ContainerError("the training image has no importable torch: the base lost it")
    want = ".".join(expected_torch.split("+")[0].split(".")[:2])
    have = ".".join(found.split("+")[0].split(".")[:2])
    if want != have:
        raise ContainerError(
            f"the training image runs torch {found}, the lock expects {expected_torch}: "
            "pick the NVIDIA base whose torch matches the lock (or update the lock)"
        )
