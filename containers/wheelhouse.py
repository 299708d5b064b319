"""The wheels an image installs, fetched on the host and handed to the build in its context.

The Dockerfiles install `containers/<image>/requirements.txt` from `build/images/wheels/<image>/`
with `--no-index` when the build passes `PIP_NO_INDEX=1`: no network inside the build, so it works
behind TLS-intercepting proxies whose CA only the host trusts, against private indexes only the
host's pip config knows, and offline CI. The host's pip (its config, cache and credentials) does
the fetching, once: wheels are kept in a cache shared by every clone
(`$XDG_CACHE_HOME/eu-ml-platform/wheels`, default ~/.cache/...) and hard-linked into the context,
so a warm build fetches nothing.

The wheels match the host's Python (CPython 3.11 here, like the local base images). Building on
NVIDIA's bases (Python 3.12), `containers.build` leaves the folder empty and pip in the build
uses the index as usual.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

from containers.errors import ContainerError
from containers.requirements import path_for
from containers.version import REPO_ROOT

CONTEXT_DIR = "build/images/wheels"


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "eu-ml-platform" / "wheels"


def pins(image: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path_for(image).read_text().splitlines():
        if line and not line.startswith(("#", " ")):  # `name==version \`, then its indented --hash lines
            name, _, version = line.partition("==")
            out[canonicalize_name(name)] = version.rstrip("\\").strip()
    return out


def _wheels(folder: Path) -> dict[tuple[str, str], Path]:
    found: dict[tuple[str, str], Path] = {}
    for path in folder.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(path.name)
        found[(canonicalize_name(name), str(version))] = path
    return found


def prepare(image: str, *, empty: bool = False) -> Path:
    """Fill build/images/wheels/<image>/ with exactly the pinned wheels; return the folder."""
    target = REPO_ROOT / CONTEXT_DIR / image
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    (target / ".keep").touch()  # COPY of an empty folder still needs the folder
    if empty:
        return target
    wanted = pins(image)
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    have = _wheels(cache)
    missing = [f"{n}=={v}" for n, v in wanted.items() if (n, v) not in have]
    if missing:
        # `pip wheel` rather than `pip download`: an sdist-only package becomes a wheel here, so the
        # build never needs setuptools from an index.
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(cache),
            *missing,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ContainerError(
                f"fetching wheels for the {image} image failed: {proc.stderr.strip()[-2000:]}"
            )
        have = _wheels(cache)
    for (name, version), path in have.items():
        if wanted.get(name) == version:
            try:
                os.link(path, target / path.name)
            except OSError:  # another filesystem
                shutil.copy2(path, target / path.name)
    got = {k for k in _wheels(target)}
    lost = [f"{n}=={v}" for n, v in wanted.items() if (n, v) not in got]
    if lost:
        raise ContainerError(
            f"no wheel for {', '.join(lost)}: check `pip wheel` works for them on this machine"
        )
    _check_hashes(target)
    return target


def _check_hashes(folder: Path) -> None:
    """Every wheel handed to the build has a sha256 the lock lists, as the build's `pip --require-hashes` will
    demand: said here, naming the file, rather than as a pip error deep in the build log."""
    import hashlib

    from containers.requirements import lock_hashes

    allowed = lock_hashes()
    wrong = [
        path.name
        for (name, _), path in _wheels(folder).items()
        if f"--hash=sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}" not in allowed.get(name, [])
    ]
    if wrong:
        raise ContainerError(
            f"{', '.join(sorted(wrong))}: not a file the lock (requirements/lock.txt) has a hash for: a wheel built "
            "here from an sdist, or a cached file that changed. Delete it from "
            f"{cache_dir()} to fetch it again; a package with no wheel on the index needs one published or vendored"
        )
