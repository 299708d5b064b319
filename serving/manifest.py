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

A build killed (SIGKILL, the OOM killer, a SIGTERM in the wrong instant) after its first version folder appeared
and before repository.json listed the version left folders Triton loads (`serve` served the unfinished version as
the newest) and the next build refused as strays. The build now names its folders in REPO/.build-pending.json
before placing them and removes that file after its commit (the manifest write): the next writer (`build`, `pin`,
`serve`) removes what it names unless the manifest lists the version, and any staged `.N.tmp` folder.

A version folder that the manifest does not list and no pending record names (a build of a serving version
from before that record, killed the same way; or a folder made by hand) is not removed: nothing says it is a
build's leftover. It is refused instead (`unlisted`, `refuse_unlisted`): `build`, `serve`, `check --repo` and
`pin latest` exit 2 naming it, since Triton would load it (as the newest version when its number is the
highest) although no manifest entry records its bundle. A pinned repository serves its pinned version only,
so `serve` and `pin N` go on there (a rollback is never blocked by it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from serving.errors import ConfigError

MANIFEST = "repository.json"
LOCK = ".repository.lock"
PENDING = ".build-pending.json"
STAGED = re.compile(r"\.\d+\.tmp")  # a build's staging folder, REPO/<model>/.N.tmp
# 2: the manifest states its format (manifests without one are 1; their options mean what
# serving.options.ABSENT_MEANS says). Bump it when an older serving would misread what this one writes.
FORMAT_VERSION = 2


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
            "building, pinning or serving; the version folders beside it are untouched"
        ) from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("versions"), dict):
        raise ConfigError(f"{path} has no 'versions' object: it is not a serving repository manifest")
    found = manifest.get("format_version", 1)
    if type(found) is not int or found < 1:
        raise ConfigError(f"{path}: format_version {found!r} is not a repository format: restore the file")
    if found > FORMAT_VERSION:
        # A pin or build here would rewrite it in this older format, dropping what the newer serving recorded.
        raise ConfigError(
            f"{path} is repository format {found}, written by a newer serving; this one reads formats 1 to "
            f"{FORMAT_VERSION}: build, pin or serve it with a serving (image) that reads format {found}"
        )
    return manifest


def versions(repo: str | Path) -> list[int]:
    return sorted(int(v) for v in read_manifest(repo)["versions"])


def write_manifest(repo: Path, manifest: dict[str, Any]) -> None:
    manifest["format_version"] = FORMAT_VERSION
    atomic_write(repo / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def begin_build(repo: Path, version: int, folders: list[str]) -> None:
    """Before the build's first version folder appears (the caller holds the lock)."""
    atomic_write(repo / PENDING, json.dumps({"version": version, "pid": os.getpid(), "folders": folders}))


def end_build(repo: Path) -> None:
    (repo / PENDING).unlink(missing_ok=True)


def interrupted(repo: Path) -> bool:
    """A build stopped before its commit left something here (cheap: `serve` asks before taking the lock)."""
    models = [p for p in repo.iterdir() if p.is_dir()] if repo.is_dir() else []
    staged = any(STAGED.fullmatch(p.name) for m in models for p in m.iterdir())
    return staged or (repo / PENDING).exists()


def undo_interrupted_build(repo: Path, manifest: dict[str, Any]) -> bool:
    """Remove what a build stopped before its commit left; True when a version folder was removed (the caller
    rewrites the configs from the manifest: the stopped build may have written its own). Holds the lock."""
    removed = False
    pending = repo / PENDING
    if pending.exists():
        try:
            record = json.loads(pending.read_text())
            version, folders = str(int(record["version"])), [str(f) for f in record["folders"]]
        except (ValueError, KeyError, TypeError):  # written whole, so only a hand edit gets here
            version, folders = "", []
        if version and version not in manifest["versions"]:
            for name in folders:
                path = repo / name
                if path.parent.parent == repo and path.name == version and path.is_dir():
                    shutil.rmtree(path)
                    removed = True
            if removed:
                print(
                    f"{repo}: removed version {version} ({', '.join(folders)}) left by a build that was "
                    f"stopped (pid {record.get('pid')}) before {MANIFEST} listed it",
                    file=sys.stderr,
                )
        pending.unlink()
    models = [p for p in repo.iterdir() if p.is_dir()]
    version_dirs = [v for m in models for v in m.iterdir() if v.name.isdigit() and v.is_dir()]
    for folder in (repo, *models, *version_dirs):
        for path in folder.iterdir():
            if STAGED.fullmatch(path.name) and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            elif path.name.startswith(".") and path.name.endswith(".tmp") and path.is_file():
                path.unlink()  # a temporary file (atomic_write, a graph copy) left by a kill before its rename
    return removed


def unlisted(repo: Path, manifest: dict[str, Any], models: tuple[str, ...]) -> list[Path]:
    """The version folders of `models` (digit names, as Triton reads them) that `manifest` does not list."""
    listed = set(manifest["versions"])
    found = [v for m in models if (repo / m).is_dir() for v in (repo / m).iterdir()]
    strays = [v for v in found if v.name.isdigit() and v.name not in listed and v.is_dir()]
    return sorted(strays, key=lambda v: (int(v.name), v.parent.name))


def refuse_unlisted(repo: Path, manifest: dict[str, Any], models: tuple[str, ...]) -> None:
    """ConfigError naming every unlisted version folder and the fix (the module docstring says why)."""
    strays = unlisted(repo, manifest, models)
    if not strays:
        return
    numbers = sorted({int(v.name) for v in strays})
    these = "that version" if len(numbers) == 1 else "those versions"
    raise ConfigError(
        f"{', '.join(map(str, strays))} already {'exists' if len(strays) == 1 else 'exist'} but "
        f"{repo / MANIFEST} does not list version {', '.join(map(str, numbers))} (left by an interrupted "
        f"build of an older serving, or made by hand): Triton would serve {these}, although nothing records "
        f"the bundle. Delete the folders (rm -r {' '.join(map(str, strays))}) and run this again; to serve "
        f"that model, build its bundle into {repo} (or pin a listed version: a pinned repository serves only it)"
    )


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` whole: a kill mid-write leaves the previous file, never a truncated one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # as a plain write leaves it (mkstemp makes it owner-only)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
