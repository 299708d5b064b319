"""Checkpoints on a local folder or an object-storage prefix (fsspec: s3:// gs:// az://).

Layout: ``<uri>/step-000000120/`` holding ``state.pt`` (model, optimizer, scheduler, grad
scaler; written by rank 0), ``rank-00000.pt`` ... (each rank's RNG states), ``trainer.json``
(step, epoch, sampler position, early-stopping state, config, dataset manifest hash) and,
written last, ``MANIFEST.json`` with the size and SHA-256 of every file. A checkpoint
without a manifest, or whose files do not match it, is incomplete: resume skips it and
falls back to the previous one. Each file is written under a temporary name and renamed
(local) or PUT in one request (object stores, where a PUT is atomic), so the manifest
always commits a whole checkpoint. ``best-<step>/`` holds the best model weights so far.
Every store operation is retried on transient errors with backoff and jitter (training/retry.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

MANIFEST = "MANIFEST.json"
STEP_PREFIX = "step-"
BEST_PREFIX = "best-"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Store:
    """A folder or bucket prefix: atomic file writes, reads, listings, deletes."""

    def __init__(self, uri: str) -> None:
        import fsspec
        from fsspec.implementations.local import LocalFileSystem

        self.uri = uri.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.uri)
        self.root = self.root.rstrip("/")
        self.local = isinstance(self.fs, LocalFileSystem)
        if self.local:
            os.makedirs(self.root, exist_ok=True)

    def _path(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def _call(self, operation: str, fn: Any, *args: Any) -> Any:
        if self.local:
            return fn(*args)
        from training import retry

        return retry.call(self.uri, operation, fn, *args)

    def write(self, rel: str, data: bytes) -> None:
        path = self._path(rel)
        if self.local:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.tmp-{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        else:
            self._call(f"write {rel}", self.fs.pipe_file, path, data)

    def read(self, rel: str) -> bytes:
        return bytes(self._call(f"read {rel}", self.fs.cat_file, self._path(rel)))

    def exists(self, rel: str) -> bool:
        def _info() -> bool:
            # fs.exists() swallows connection errors as "absent": ask for the object's info instead.
            try:
                self.fs.info(self._path(rel))
            except FileNotFoundError:
                return False
            return True

        return bool(self._call(f"stat {rel}", _info))

    def dirs(self, prefix: str) -> list[str]:
        """Names directly under the root that are ``<prefix><step digits>``, oldest step first.

        Anything else (a user's ``step-000000120.bak`` copy, ``best-000000040-keep``) is neither ours to
        resume from nor ours to prune: it used to crash resume (its step is not a number) and be deleted.
        """
        self.fs.invalidate_cache(self.root)
        try:
            entries = self._call("list", self.fs.ls, self.root, False)
        except FileNotFoundError:
            return []
        names = {e.rstrip("/").rsplit("/", 1)[-1] for e in entries}
        ours = [
            n
            for n in names
            if n.startswith(prefix) and n[len(prefix) :].isascii() and n[len(prefix) :].isdigit()
        ]
        return sorted(ours, key=lambda n: (int(n[len(prefix) :]), n))

    def delete(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._call(f"delete {rel}", lambda: self.fs.rm(self._path(rel), recursive=True))


@dataclass(slots=True)
class Loaded:
    name: str
    step: int
    files: dict[str, bytes]
    """The files this rank needs, verified against the manifest."""
    manifest: dict[str, Any]


def step_name(step: int, prefix: str = STEP_PREFIX) -> str:
    return f"{prefix}{step:09d}"


def write_checkpoint(
    store: Store,
    name: str,
    files: dict[str, bytes],
    *,
    gather: Any = None,
    meta: dict[str, Any] | None = None,
    is_main: bool = True,
) -> None:
    """Write this rank's ``files`` under ``name``; rank 0 then commits the manifest of all ranks' files.

    ``gather`` is Dist.all_gather_object in a distributed run (every rank must call this).
    """
    entries = {}
    for rel, data in files.items():
        store.write(f"{name}/{rel}", data)
        entries[rel] = {"sha256": _sha(data), "bytes": len(data)}
    everyone = gather(entries) if gather else [entries]
    if is_main:
        merged: dict[str, Any] = {}
        for part in everyone:
            merged.update(part)
        manifest = {
            "format_version": 1,
            "name": name,
            "created": time.time(),
            "files": merged,
            **(meta or {}),
        }
        store.write(f"{name}/{MANIFEST}", json.dumps(manifest, indent=1, sort_keys=True).encode())


def verify(
    store: Store, name: str, wanted: list[str] | None = None
) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """(manifest, {file: bytes}) if ``name`` is complete and its files (or ``wanted`` ones) match."""
    try:
        manifest = json.loads(store.read(f"{name}/{MANIFEST}"))
        listed = manifest["files"]
    except (FileNotFoundError, ValueError, KeyError, TypeError) as exc:
        log.warning(
            "checkpoint %s is incomplete (no valid manifest: %s); skipping it", name, type(exc).__name__
        )
        return None
    files: dict[str, bytes] = {}
    for rel in wanted if wanted is not None else list(listed):
        if rel not in listed:
            log.warning("checkpoint %s lacks %s; skipping it", name, rel)
            return None
        try:
            data = store.read(f"{name}/{rel}")
        except FileNotFoundError:
            log.warning("checkpoint %s: %s is missing; skipping it", name, rel)
            return None
        if len(data) != listed[rel]["bytes"] or _sha(data) != listed[rel]["sha256"]:
            log.warning(
                "checkpoint %s: %s does not match its checksum (truncated or corrupt); skipping it", name, rel
            )
            return None
        files[rel] = data
    return manifest, files


def latest(
    store: Store,
    prefix: str = STEP_PREFIX,
    wanted: list[str] | None = None,
    required: tuple[str, ...] = (),
    corrupt: list[str] | None = None,
) -> Loaded | None:
    """The newest complete, uncorrupted checkpoint that lists every `required` file (falling back to older ones).

    ``corrupt`` collects the newer checkpoints skipped although they have a manifest (a file truncated,
    altered or missing): `prune` counts those as complete, so they would outrank this run's next saves.
    """
    for name in reversed(store.dirs(prefix)):
        found = verify(store, name, wanted)
        if found is None:
            if corrupt is not None and store.exists(f"{name}/{MANIFEST}"):
                corrupt.append(name)
            continue
        manifest, files = found
        missing = [f for f in required if f not in files]
        if missing:
            log.error(
                "checkpoint %s/%s lists no %s (only %s): it cannot be resumed; skipping it (delete it to silence this)",
                store.uri,
                name,
                " or ".join(missing),
                ", ".join(sorted(files)) or "nothing",
            )
            continue
        return Loaded(name=name, step=int(name[len(prefix) :]), files=files, manifest=manifest)
    return None


def prune(store: Store, keep_last: int, prefix: str = STEP_PREFIX) -> list[str]:
    """Delete all but the newest ``keep_last`` complete checkpoints, and incomplete ones older than those."""
    names = store.dirs(prefix)
    complete = [n for n in names if store.exists(f"{n}/{MANIFEST}")]
    keep = set(complete[-keep_last:])
    if not keep:
        return []
    first_kept = min(names.index(n) for n in keep)  # names are in step order
    doomed = [n for n in names[:first_kept] if n not in keep]
    for name in doomed:
        store.delete(name)
    return doomed


def recorded_best(store: Store, best_step: int | None) -> Loaded | None:
    """The best-model checkpoint of the step the run recorded as best (never the newest folder by name).

    A ``best-<n>/`` folder with a higher step can be left over from an attempt whose newest checkpoint
    was broken and skipped on resume: its weights belong to a history this run no longer has.
    """
    if best_step is None:
        return None
    name = step_name(best_step, BEST_PREFIX)
    found = verify(store, name, ["model.pt"])
    if found is None:
        log.warning("the recorded best checkpoint %s is missing or broken: using the last weights", name)
        return None
    manifest, files = found
    return Loaded(name=name, step=best_step, files=files, manifest=manifest)


def prune_best(store: Store, best_step: int) -> list[str]:
    """Delete every best-model folder except the recorded best step's."""
    keep = step_name(best_step, BEST_PREFIX)
    doomed = [n for n in store.dirs(BEST_PREFIX) if n != keep]
    for name in doomed:
        store.delete(name)
    return doomed
