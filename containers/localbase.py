"""Base images made on this machine, standing in for NVIDIA's when no registry can be pulled from.

The Dockerfiles name NVIDIA's PyTorch and Triton images as their bases; CI machines cannot pull
them. This module builds the closest local equivalent and hands it to the build as `BASE_IMAGE`,
so the Dockerfiles are built unchanged apart from that argument:

- `training`: Debian bookworm minbase (debootstrap) + python3 (3.11) + pip + the CPU torch wheel in
  the system site-packages, where NVIDIA's PyTorch image keeps its own torch.
- `serving`: the same Debian + python3 + numpy + the real `tritonserver` 2.51 binary and python
  backend that the `nvidia-pytriton` wheel bundles, laid out under /opt/tritonserver and on PATH
  as in NVIDIA's tritonserver image (that image carries the onnxruntime backend too; this one
  does not, so a locally built repository uses the python backend).

Both are cached in buildah's storage under a tag derived from every input (suite, packages,
wheel versions, this recipe's version): a warm CI run finds the tag and skips the ~2 minutes of
debootstrap and copying; a fresh machine builds it once.

    python -m containers.localbase training serving   # build (or find) both, print their refs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from containers import buildah
from containers.errors import ContainerError
from containers.requirements import lock_pins

# Bumped whenever the recipe below changes in a way the key would not otherwise see.
RECIPE_VERSION = "4"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# As in NVIDIA's images: `python` (python-is-python3) and pip, which the Dockerfiles use;
# ca-certificates for pip over https; libpython for Triton's python backend stub.
DEBIAN_PACKAGES = ("python3", "python-is-python3", "python3-pip", "libpython3.11", "ca-certificates")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _locked(name: str) -> str:
    """`name==version` as requirements/lock.txt pins it, without the local label (`+cpu`): the
    stand-in takes whichever build of that release the host's pip finds, as NVIDIA's base has its own."""
    return f"{name}=={lock_pins()[name].split('+')[0]}"


# What the NVIDIA image provides in its system Python, pinned to what this project runs with.
PYTHON_PACKAGES = {
    "training": (_locked("torch"),),
    "serving": (_locked("numpy"),),
}
PYTRITON = _locked("nvidia-pytriton")
IMAGE_REPO = "localhost/eu-ml-platform/localbase"
SITE_PACKAGES = "usr/local/lib/python3.11/dist-packages"
KINDS = ("training", "serving")


@dataclass(frozen=True, slots=True)
class LocalBase:
    kind: str
    ref: str
    built: bool
    """False when the image was found in the cache (buildah storage)."""
    seconds: float
    size_bytes: int


def debian_mirror(
    sources: Sequence[Path] = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d")),
) -> str:
    """The Debian mirror this machine's apt uses (a CI machine may only reach its own)."""
    files: list[Path] = []
    for src in sources:
        if src.is_dir():
            files += sorted(p for p in src.iterdir() if p.suffix in (".list", ".sources"))
        elif src.is_file():
            files.append(src)
    for path in files:
        text = path.read_text(errors="replace")
        # one-line format: deb [opts] URL bookworm main
        for m in re.finditer(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+" + SUITE + r"\s", text, re.M):
            return m.group(1)
        # deb822 format: a stanza with URIs: and Suites: containing the plain suite
        for stanza in re.split(r"\n\s*\n", text):
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites and SUITE in suites.group(1).split():
                return uris.group(1)
    return DEFAULT_MIRROR


def cache_key(kind: str, mirror: str) -> str:
    parts = {
        "recipe": RECIPE_VERSION,
        "kind": kind,
        "suite": SUITE,
        "mirror": mirror,
        "debian": DEBIAN_PACKAGES,
        "python": PYTHON_PACKAGES[kind],
        "pytriton": PYTRITON if kind == "serving" else None,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def image_ref(kind: str, mirror: str | None = None) -> str:
    return f"{IMAGE_REPO}-{kind}:{cache_key(kind, mirror or debian_mirror())}"


def _run(cmd: Sequence[str], what: str) -> None:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ContainerError(
            f"{what} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-3000:]}"
        )


def _pip_target(target: Path, requirements: Sequence[str], *, no_deps: bool = False) -> None:
    # The host's pip resolves the wheels (it may know local wheel folders and indexes the image
    # cannot see); both sides are CPython 3.11 on x86-64 glibc, so the wheels fit the image.
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(target)]
    if no_deps:
        cmd.append("--no-deps")
    _run([*cmd, *requirements], f"pip install {' '.join(requirements)}")


def _debootstrap(root: Path, mirror: str) -> None:
    if shutil.which("debootstrap") is None:
        raise ContainerError("debootstrap is not installed: `apt-get install -y debootstrap`")
    _run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(DEBIAN_PACKAGES)}",
            SUITE,
            str(root),
            mirror,
        ],
        f"debootstrap {SUITE} from {mirror}",
    )
    # Shrink: apt's package cache and lists are not part of any NVIDIA base either.
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (root / sub).glob("*"):
            if p.is_file():
                p.unlink()


def _add_tritonserver(root: Path) -> list[str]:
    """Install the tritonserver bundled in nvidia-pytriton as NVIDIA's image lays it out."""
    prefix = root / "opt/pytriton"
    _pip_target(prefix, [PYTRITON], no_deps=True)
    server = prefix / "pytriton/tritonserver"
    if not (server / "bin/tritonserver").exists():
        raise ContainerError(f"{PYTRITON} has no bin/tritonserver: is this the x86-64 wheel?")
    # The python backend needs the stub built for the image's python next to libtriton_python.so.
    stub = server / "python_backend_stubs/3.11/triton_python_backend_stub"
    shutil.copy2(stub, server / "backends/python/triton_python_backend_stub")
    (root / "opt/tritonserver").symlink_to("pytriton/pytriton/tritonserver")
    return [f"PATH=/opt/tritonserver/bin:{DEFAULT_PATH}"]


def _commit_rootfs(root: Path, ref: str, kind: str, env: Sequence[str]) -> None:
    ctr = buildah.run(["from", "scratch"]).strip()
    try:
        mnt = Path(buildah.run(["mount", ctr]).strip())
        _run(["cp", "-a", f"{root}/.", str(mnt)], "copying the root filesystem into the image")
        buildah.run(["unmount", ctr])
        config = ["config", "--os", "linux", "--arch", "amd64", "--cmd", "/bin/bash"]
        config += ["--label", f"org.opencontainers.image.title=eu-ml-platform local {kind} base"]
        config += [
            "--label",
            f"org.opencontainers.image.description=Debian {SUITE} stand-in for NVIDIA's image",
        ]
        for item in env:
            config += ["--env", item]
        buildah.run([*config, ctr])
        buildah.run(["commit", "--quiet", "--format", "docker", "--rm", ctr, ref])
    except BaseException:
        subprocess.run([*buildah._base(), "rm", ctr], capture_output=True, check=False)
        raise


def ensure(kind: str, *, workdir: Path | None = None, rebuild: bool = False) -> LocalBase:
    """Return the local base image for `kind`, building it unless the cache holds it."""
    import time

    if kind not in KINDS:
        raise ContainerError(f"unknown base kind {kind!r}: choose one of {', '.join(KINDS)}")
    if os.geteuid() != 0:
        raise ContainerError("building a local base image needs root (debootstrap, chroot isolation)")
    mirror = debian_mirror()
    ref = image_ref(kind, mirror)
    start = time.monotonic()
    if not rebuild and buildah.image_exists(ref):
        return LocalBase(kind, ref, False, time.monotonic() - start, buildah.image_size(ref))
    with tempfile.TemporaryDirectory(prefix=f"localbase-{kind}-", dir=workdir) as tmp:
        root = Path(tmp) / "rootfs"
        _debootstrap(root, mirror)
        _pip_target(root / SITE_PACKAGES, PYTHON_PACKAGES[kind])
        env = _add_tritonserver(root) if kind == "serving" else [f"PATH={DEFAULT_PATH}"]
        _commit_rootfs(root, ref, kind, env)
    return LocalBase(kind, ref, True, time.monotonic() - start, buildah.image_size(ref))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m containers.localbase", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("kinds", nargs="*", choices=KINDS, default=list(KINDS))
    parser.add_argument("--rebuild", action="store_true", help="ignore the cache")
    args = parser.parse_args(argv)
    try:
        for kind in args.kinds:
            base = ensure(kind, rebuild=args.rebuild)
            state = "built" if base.built else "cached"
            print(f"{kind}: {base.ref} ({state} in {base.seconds:.0f} s, {base.size_bytes / 1e6:.0f} MB)")
    except ContainerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
