"""The exact packages each image installs, computed from pyproject.toml and the project's lock.

An image installs `containers/<image>/requirements.txt`: the full dependency closure of its
direct dependencies, every package pinned to the version in `requirements/lock.txt`, installed
with `pip --no-deps` so nothing outside the list (and nothing newer) can sneak in. Packages the
NVIDIA base image already provides (torch and the CUDA wheels for training; the server itself for
serving) are left out and not descended into: reinstalling torch would replace NVIDIA's CUDA
build with a generic one.

The files are generated, committed, and checked by a test against the lock:

    python -m containers.requirements            # rewrite both files after `make lock`
    python -m containers.requirements --check    # exit 1 if they are stale
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from containers.errors import ContainerError

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCK = REPO_ROOT / "requirements/lock.txt"

# Per image: (what it needs directly, what its base image provides).
# Training: the `training` extra of pyproject.toml. NVIDIA's PyTorch image brings torch + CUDA.
# Serving: only what the Triton python models import (tokenizer, ONNX Runtime for the python
# backend, numpy); the client libraries and nvidia-pytriton (a server for local runs) stay out.
_BASE_PROVIDED = {
    "torch",
    "triton",
    "nvidia-pytriton",
    "cuda-python",
    "cuda-bindings",
    "cuda-core",
    "cuda-pathfinder",
}
# The inference-record writer (monitoring/records.py, run inside the sentiment python model) opens the stack's
# logs bucket through fsspec as s3://, gs:// or abfs:// (infra/program.py serving_env): each scheme's
# filesystem must be in the image, or every record is dropped in production.
SERVING_DIRECT = ("tokenizers", "onnxruntime", "numpy", "s3fs", "gcsfs", "adlfs")


def _is_base_provided(name: str) -> bool:
    return name in _BASE_PROVIDED or name.startswith("nvidia-")


def lock_pins(lock: Path = LOCK) -> dict[str, str]:
    """{canonical name: version} of every `name==version` line of the lock."""
    pins: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        # `name[extras]==version \` (hashed locks keep the extras pip must see pinned).
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s\\]+)", line.strip())
        if m:
            pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def lock_hashes(lock: Path = LOCK) -> dict[str, list[str]]:
    """{canonical name: its `--hash=sha256:...` options} as `make lock` recorded them (every file of that version
    on the index: each platform's wheel and the sdist)."""
    hashes: dict[str, list[str]] = {}
    current = None
    for line in lock.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==", line)
        if m:
            current = canonicalize_name(m.group(1))
            hashes.setdefault(current, [])
        elif current is not None and line.strip().startswith("--hash="):
            hashes[current].append(line.strip().rstrip("\\").strip())
    return hashes


# The training image also runs the cluster's batch jobs that are not training: the drift CronJob
# (`python -m monitoring drift`) and the retraining pipeline's steps (pipeline, promotion).
IMAGE_EXTRAS = {"training": ("training", "monitoring")}


def direct_requirements(image: str, pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[Requirement]:
    if image == "serving":
        return [Requirement(name) for name in SERVING_DIRECT]
    with pyproject.open("rb") as fh:
        extras = tomllib.load(fh)["project"]["optional-dependencies"]
    return [Requirement(spec) for extra in IMAGE_EXTRAS.get(image, (image,)) for spec in extras[extra]]


def closure(direct: Iterable[Requirement]) -> set[str]:
    """Canonical names of the direct requirements and everything they need, per installed metadata.

    The project virtualenv is installed from the lock, so its metadata is the lock's dependency
    graph; markers are evaluated for this interpreter (CPython 3.11, Linux x86-64, like the images).
    """
    seen: set[str] = set()
    visited: set[tuple[str, frozenset[str]]] = set()
    todo: list[Requirement] = list(direct)
    while todo:
        req = todo.pop()
        name, extras = canonicalize_name(req.name), frozenset(req.extras)
        if _is_base_provided(name) or (name, extras) in visited:
            continue
        visited.add((name, extras))
        seen.add(name)
        try:
            requires = md.requires(req.name) or []
        except md.PackageNotFoundError as err:
            raise SystemExit(
                f"{req.name} is not installed in this virtualenv: run `make setup` first"
            ) from err
        envs = [{"extra": e} for e in extras] or [{"extra": ""}]
        for spec in requires:
            dep = Requirement(spec)
            if dep.marker is None or any(dep.marker.evaluate(env) for env in envs):
                todo.append(dep)
    return seen


def render(image: str, lock: Path = LOCK) -> str:
    pins, hashes = lock_pins(lock), lock_hashes(lock)
    names = sorted(closure(direct_requirements(image)))
    missing = [n for n in names if n not in pins or not hashes.get(n)]
    if missing:
        raise SystemExit(
            f"not pinned with hashes in {lock.name}: {', '.join(missing)}; run `make lock` to re-pin"
        )
    header = [
        f"# Packages of the {image} image: generated by `python -m containers.requirements` from",
        "# pyproject.toml and requirements/lock.txt; do not edit. Installed with pip --no-deps --require-hashes:",
        "# a file whose sha256 the lock does not list (a swapped index artifact, a tampered wheel) is refused.",
    ]
    return "\n".join([*header, *(entry(n, pins[n], hashes[n]) for n in names)]) + "\n"


def stale(image: str, lock: Path | None = None) -> list[str]:
    """What in `containers/<image>/requirements.txt` the lock no longer says (a pin, a missing or changed hash),
    each with its fix; empty when it is current. Read from both files alone: no virtualenv needed.

    Without it, a build after `make lock` alone installs the old pins (on a local base, its wheels then fail the
    hash check with a message about the wheel cache)."""
    lock = lock or LOCK
    pins, hashes = lock_pins(lock), lock_hashes(lock)
    path = path_for(image)
    wanted, wanted_hashes = lock_pins(path), lock_hashes(path)
    regenerate = f"run `python -m containers.requirements` to regenerate {path.relative_to(REPO_ROOT)}"
    out: list[str] = []
    for name, version in sorted(wanted.items()):
        if name not in pins:
            out.append(f"{name}=={version} is not in {lock.name}: {regenerate}")
        elif not hashes.get(name):
            out.append(
                f"{name}=={pins[name]} has no --hash in {lock.name}: run `make lock` to re-pin it with hashes"
            )
        elif pins[name] != version:
            out.append(f"{name}=={version}, but {lock.name} pins {pins[name]}: {regenerate}")
        elif sorted(wanted_hashes.get(name, [])) != sorted(hashes[name]):
            out.append(f"{name}=={version} carries other hashes than {lock.name}: {regenerate}")
    return out


def check_current(images: Iterable[str]) -> None:
    """Refuse a build whose requirement files the lock no longer backs (`stale`), naming each fix."""
    found = [line for image in images for line in stale(image)]
    if found:
        raise ContainerError("the image requirements do not match the lock:\n  " + "\n  ".join(found))


def entry(name: str, version: str, hashes: Iterable[str]) -> str:
    """One requirement in pip's hash-checking format: `name==version \\` then one `--hash=...` per line."""
    return " \\\n".join([f"{name}=={version}", *(f"    {h}" for h in hashes)])


def path_for(image: str) -> Path:
    return REPO_ROOT / "containers" / image / "requirements.txt"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m containers.requirements")
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed file differs")
    args = parser.parse_args(argv)
    stale = []
    for image in ("training", "serving"):
        text = render(image)
        path = path_for(image)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(REPO_ROOT)))
        else:
            path.write_text(text)
            count = sum(1 for line in text.splitlines() if line and not line.startswith(("#", " ")))
            print(f"wrote {path.relative_to(REPO_ROOT)} ({count} packages)")
    if stale:
        print(f"stale: {', '.join(stale)}: run `python -m containers.requirements`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
