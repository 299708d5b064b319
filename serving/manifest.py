"""repository.json, the model repository's manifest, and its one writer at a time.

The manifest is the only record of every version's bundle and metrics: it is replaced whole, never rewritten in
place (a kill mid-write truncated it), and never "repaired" when unreadable.

`build` and `pin` hold REPO/.repository.lock (flock) while they read and write it. Two builds started together
(two pipeline runs, a manual build beside CI's) both took version latest + 1 and staged it in the same `.N.tmp`
folders, each deleting the other's half-copied files: one failed with an OSError traceback (exit 1), and the
version folder could hold files of either bundle while repository.json named one. A `pin` that read
repository.json before a build wrote it dropped that build's version from it, so the next build refused the
version folder as a stray. A second writer now waits for the first, then reads the manifest that one wrote. The
kernel drops a flock with its holder: a killed build leaves no stale lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from serving.errors import ConfigError

MANIFEST = "repository.json"
LOCK = ".repository.lock"


@contextlib.contextmanager
def locked(repo: Path) -> Iterator[None]:
    try:
        repo.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ConfigError(f"{repo} is a file, not a folder: pass the model repository folder") from None
    fd = os.open(repo / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            print(
                f"{repo}: waiting for the build or pin by pid {holder} to finish", file=sys.stderr, flush=True
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass  # a filesystem without flock (some network mounts): go on unguarded rather than not at all
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def read_manifest(repo: str | Path) -> dict[str, Any]:
    path = Path(repo) / MANIFEST
    if not path.is_file():
        return {"versions": {}, "options": None, "pinned": None}
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        # Never rewritten here: it lists every version's bundle and metrics (nothing else records them).
        raise ConfigError(
            f"{path} is not valid JSON ({exc}): restore it (e.g. from version control) before "
            "building or pinning; the version folders beside it are untouched"
        ) from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("versions"), dict):
        raise ConfigError(f"{path} has no 'versions' object: it is not a serving repository manifest")
    return manifest


def versions(repo: str | Path) -> list[int]:
    return sorted(int(v) for v in read_manifest(repo)["versions"])


def write_manifest(repo: Path, manifest: dict[str, Any]) -> None:
    tmp = repo / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    tmp.replace(repo / MANIFEST)
