"""Thin wrapper around the buildah CLI, used where no Docker engine answers (as on CI machines).

Every call passes the same storage driver: mixing drivers on one storage root is an error. The
driver is `overlay` where the kernel allows an overlay mount (layers are shared, a container
costs nothing), else `vfs`, which works anywhere (sandboxes, nested containers) but copies the
whole image for every layer and every container; a storage root already initialised with one
driver keeps it. `BUILDAH_STORAGE_DRIVER` overrides the choice. Isolation is `chroot`: no user
namespaces or runc needed, which is what these machines allow.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from containers.errors import ContainerError

ISOLATION = "chroot"
STORAGE_ROOT = Path("/var/lib/containers/storage")


def _overlay_mount_works() -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    with tempfile.TemporaryDirectory(prefix="overlay-probe-", dir="/var/tmp") as tmp:
        dirs = {name: Path(tmp) / name for name in ("lower", "upper", "work", "merged")}
        for d in dirs.values():
            d.mkdir()
        opts = f"lowerdir={dirs['lower']},upperdir={dirs['upper']},workdir={dirs['work']}"
        proc = subprocess.run(
            ["mount", "-t", "overlay", "overlay", "-o", opts, str(dirs["merged"])],
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            return False
        subprocess.run(["umount", str(dirs["merged"])], capture_output=True, check=False)
        return True


@functools.cache
def storage_driver() -> str:
    chosen = os.environ.get("BUILDAH_STORAGE_DRIVER")
    if chosen:
        return chosen
    for driver in ("overlay", "vfs"):
        if (STORAGE_ROOT / f"{driver}-images").is_dir():
            return driver
    return "overlay" if _overlay_mount_works() else "vfs"


def available() -> bool:
    return shutil.which("buildah") is not None


def _base() -> list[str]:
    exe = shutil.which("buildah")
    if exe is None:
        raise ContainerError(
            "buildah is not installed: `apt-get install -y buildah` (Debian/Ubuntu), or start a Docker engine"
        )
    return [exe, "--storage-driver", storage_driver()]


def run(
    args: Sequence[str], *, capture: bool = True, check: bool = True, timeout: float | None = None
) -> str:
    """Run `buildah ARGS`; return stdout. On failure the error carries buildah's own message."""
    cmd = [*_base(), *args]
    proc = subprocess.run(cmd, capture_output=capture, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        detail = (proc.stderr or "").strip()[-4000:] if capture else "(see the output above)"
        raise ContainerError(f"`{' '.join(cmd)}` failed with exit {proc.returncode}: {detail}")
    return proc.stdout if capture else ""


def image_exists(ref: str) -> bool:
    proc = subprocess.run([*_base(), "inspect", "--type", "image", ref], capture_output=True, check=False)
    return proc.returncode == 0


def inspect_image(ref: str) -> dict[str, Any]:
    return json.loads(run(["inspect", "--type", "image", ref]))


def image_id(ref: str) -> str:
    return str(inspect_image(ref)["FromImageID"])


def image_digest(ref: str) -> str:
    """The manifest digest (`sha256:...`) of a local image: what a registry will serve it under."""
    return str(inspect_image(ref)["FromImageDigest"])


def image_size(ref: str) -> int:
    """Uncompressed size in bytes: the sum of the layers in the local manifest."""
    manifest = json.loads(inspect_image(ref)["Manifest"])
    return sum(int(layer["size"]) for layer in manifest["layers"])


def image_config(ref: str) -> dict[str, Any]:
    """The OCI image config (Entrypoint, Cmd, User, Labels, Env, Healthcheck ...)."""
    info = inspect_image(ref)
    config = dict(info["OCIv1"]["config"])
    docker_config = info.get("Docker", {}).get("config") or {}
    # Healthcheck and StopSignal are Docker-format fields; OCI format keeps StopSignal only.
    if docker_config.get("Healthcheck"):
        config["Healthcheck"] = docker_config["Healthcheck"]
    return config
