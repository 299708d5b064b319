"""Checkpoints on a local folder or an object-storage prefix (fsspec: s3:// gs:// az://).

Layout: ``<uri>/step-000000120/`` holding ``state.pt`` (model, optimizer, scheduler, grad
scaler; written by rank 0), ``rank-00000.pt`` ... (each rank's RNG states), ``trainer.json``
(step, epoch, sampler position, early-stopping state, config, dataset manifest hash) and,
written last, ``MANIFEST.json`` with the size and SHA-256 of every file. A checkpoint
without a manifest, or whose files do not match it, is incomplete: resume skips it and
falls back to the previous one; pruning keeps the newest ones by the same check (`resumable`).
Each file is written under a temporary name and renamed (local) or PUT in one request (object
stores, where a PUT is atomic), so the manifest always commits a whole checkpoint.
``best-<step>/`` holds the best model weights so far.
Every store operation is retried on transient errors with backoff and jitter (training/retry.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

MANIFEST = "MANIFEST.json"
# The checkpoint layout this code writes and reads (MANIFEST.json's format_version). A newer one is refused, not
# skipped: skipped, it counted as corrupt and resume and pruning deleted it (the newer image's progress).
FORMAT_VERSION = 1
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
        self.whole: dict[str, frozenset[str]] = {}
        """Checkpoints this process committed or verified whole, with the files their manifest lists: a
        committed checkpoint never changes, so pruning after every save need not download them again."""

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

    def check_writable(self) -> None:
        """Write and delete one small object, so that a missing bucket or a read-only identity stops the run
        before it trains: found at the first save, it cost every step up to it (on the `gpu` preset, up to
        `checkpoint.every_minutes` of GPU time) and ended in a traceback, exit 1. A local folder was made in
        __init__. Refusals are StorageAccessDenied (exit 2), outages StorageUnavailable (exit 69)."""
        if self.local:
            return
        from training.errors import StorageAccessDenied

        probe = f".write-check-{uuid.uuid4().hex}"  # not step-/best-<digits>: never resumed nor pruned
        try:
            self._call("check that checkpoints can be written", self.fs.pipe_file, self._path(probe), b"")
        except Exception as exc:
            # An object PUT finds nothing missing but the bucket itself. s3fs and gcsfs raise FileNotFoundError;
            # adlfs lets Azure's ResourceNotFoundError (error code ContainerNotFound) through.
            if not (
                isinstance(exc, FileNotFoundError) or getattr(exc, "error_code", None) == "ContainerNotFound"
            ):
                raise
            raise StorageAccessDenied(
                self.uri,
                "writing a checkpoint",
                f"the bucket does not exist ({exc})",
                "create it (the infra stack's checkpoints bucket) or fix --checkpoint-uri / checkpoint.uri "
                "/ TRAINING_CHECKPOINT_URI",
            ) from None
        self.delete(probe)

    def delete(self, rel: str) -> None:
        self.whole.pop(rel, None)
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
            "format_version": FORMAT_VERSION,
            "name": name,
            "created": time.time(),
            "files": merged,
            **(meta or {}),
        }
        store.write(f"{name}/{MANIFEST}", json.dumps(manifest, indent=1, sort_keys=True).encode())
        store.whole[name] = frozenset(merged)


def verify(
    store: Store, name: str, wanted: list[str] | None = None
) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """(manifest, {file: bytes}) if ``name`` is complete and its files (or ``wanted`` ones) match."""
    try:
        manifest = json.loads(store.read(f"{name}/{MANIFEST}"))
        if isinstance(manifest, dict):  # before its files: a newer format may list them otherwise
            check_format(manifest, f"{store.uri}/{name}")
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
    if wanted is None:
        store.whole[name] = frozenset(listed)
    return manifest, files


def check_format(manifest: dict[str, Any], where: str) -> None:
    """NewerFormatError for a checkpoint written by a newer training (mid-rollout, an older image resumed it)."""
    found = manifest.get("format_version", FORMAT_VERSION)
    if type(found) is int and found > FORMAT_VERSION:
        from training.errors import NewerFormatError

        raise NewerFormatError(
            f"checkpoint {where} is checkpoint format {found}, written by a newer training image; this one "
            f"reads format {FORMAT_VERSION}. Resume it with an image that reads format {found} (the one that "
            "wrote it: let the rollout finish), or give this run a new checkpoint.uri. Nothing was deleted"
        )


def missing(listed: Any, required: tuple[str, ...]) -> list[str]:
    """The `required` files a manifest's file list lacks."""
    return [f for f in required if f not in listed]


def resumable(
    store: Store,
    name: str,
    prefix: str = STEP_PREFIX,
    wanted: list[str] | None = None,
    required: tuple[str, ...] = (),
) -> Loaded | None:
    """``name`` loaded if resume would take it: complete, uncorrupted, and listing every `required` file.

    The one check of a checkpoint's worth: resume picks with it and pruning counts with it, so pruning never
    keeps a checkpoint that resume would skip in place of one it would take.
    """
    found = verify(store, name, wanted)
    if found is None:
        return None
    manifest, files = found
    lacking = missing(manifest["files"], required)
    if lacking:
        log.error(
            "checkpoint %s/%s lists no %s (only %s): it cannot be resumed; skipping it",
            store.uri,
            name,
            " or ".join(lacking),
            ", ".join(sorted(manifest["files"])) or "nothing",
        )
        return None
    return Loaded(name=name, step=int(name[len(prefix) :]), files=files, manifest=manifest)


def latest(
    store: Store,
    prefix: str = STEP_PREFIX,
    wanted: list[str] | None = None,
    required: tuple[str, ...] = (),
    corrupt: list[str] | None = None,
) -> Loaded | None:
    """The newest checkpoint `resumable` takes (falling back to older ones).

    ``corrupt`` collects the newer checkpoints skipped although they have a manifest (a file truncated,
    altered or missing, or no `required` file): they can never be resumed, so the caller deletes them.
    """
    for name in reversed(store.dirs(prefix)):
        found = resumable(store, name, prefix, wanted, required)
        if found is not None:
            return found
        if corrupt is not None and store.exists(f"{name}/{MANIFEST}"):
            corrupt.append(name)
    return None


def prune(
    store: Store, keep_last: int, prefix: str = STEP_PREFIX, required: tuple[str, ...] = ()
) -> list[str]:
    """Keep the newest ``keep_last`` checkpoints that resume would take (`resumable`, same `required`).

    Deleted: every folder older than the oldest kept one, and newer ones whose manifest resume rejects (as
    resume deletes them). A newer folder without a manifest is left: only its writer knows it is abandoned.
    Counting a rejected checkpoint as kept used to push good ones out, down to none with keep_last=1.
    """
    names = store.dirs(prefix)
    keep: list[str] = []
    rejected: list[str] = []
    for name in reversed(names):
        if len(keep) == keep_last:
            break
        if name not in store.whole:  # committed or verified whole by this process: no download again
            resumable(store, name, prefix, required=required)  # records it in store.whole when whole
        listed = store.whole.get(name)
        if listed is not None and not missing(listed, required):
            keep.append(name)
        elif store.exists(f"{name}/{MANIFEST}"):
            rejected.append(name)
    if not keep:
        return []
    first_kept = names.index(keep[-1])  # names are in step order; every rejected one is newer
    doomed = [*names[:first_kept], *reversed(rejected)]
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
    """Delete every best-model folder except the recorded best step's and those a step checkpoint records.

    Each step checkpoint's manifest carries the ``best_step`` of its trainer.json: the run resumes from one of
    them, with that best. Deleting the previous best as soon as a new one was written lost it when the run died
    before its next save (node loss, OOM: no SIGTERM save), and the final model silently became the last
    weights. A manifest from before ``best_step`` was recorded there keeps every folder (nothing is known).
    """
    keep = {step_name(best_step, BEST_PREFIX)}
    for name in store.dirs(STEP_PREFIX):
        try:
            manifest = json.loads(store.read(f"{name}/{MANIFEST}"))
        except (FileNotFoundError, ValueError):
            continue  # no manifest: resume never takes it
        if not isinstance(manifest, dict) or "best_step" not in manifest:
            return []
        if manifest["best_step"] is not None:
            keep.add(step_name(int(manifest["best_step"]), BEST_PREFIX))
    doomed = [n for n in store.dirs(BEST_PREFIX) if n not in keep]
    for name in doomed:
        store.delete(name)
    return doomed
