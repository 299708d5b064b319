"""What Python a built image really carries: its package inventory, torch/CUDA, and a CycloneDX SBOM.

The inventory is read inside the image by the image's own interpreter (importlib.metadata over its
sys.path: the base's packages and ours), so the SBOM describes the image, not the lock we hoped
went in. `cyclonedx-py` (the CycloneDX project's generator) turns it into CycloneDX JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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
print(json.dumps({"python": sys.version.split()[0], "packages": sorted(dists.values()),
                  "torch": torch, "cuda": cuda}))
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


def write_sbom(inventory: dict[str, Any], out: Path, *, epoch: str | None = None) -> Path:
    """CycloneDX 1.6 JSON of the inventory, validated by the generator itself."""
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
    return out


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
