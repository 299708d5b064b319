"""Where a job writes its report: a local folder, or an object-storage prefix (s3://, gs://, abfs://, az://).

The scheduled drift job is given its bucket's drift prefix (infra/k8s/monitoring_stack.py) and runs with a
read-only root filesystem: a URL must never become a local folder named `s3:`. The report is written to a
private temporary folder (the pod's scratch /tmp) and uploaded once complete, so a reader of the prefix
never sees half a report.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from monitoring.errors import InputError


def is_url(out: str) -> bool:
    return "://" in out


def joined(out: str, name: str) -> str:
    """Where `name` ends up under `out` (for messages)."""
    return f"{out.rstrip('/')}/{name}" if is_url(out) else str(Path(out) / name)


def local_dir(folder: str | Path, flag: str = "--out") -> Path:
    """`folder`, created if missing; one that cannot be (a file, or under one; no permission) is exit 2 naming it.

    Called before the job's work where it can be: an evaluation or a reference build takes minutes."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"{flag} {folder}: cannot be used as the output folder ({type(exc).__name__}: {exc.strerror or exc}); "
            "give a folder this job may create or write"
        ) from None
    return path


def local_file(path: Path, flag: str = "--out") -> Path:
    """`path` to write one file to: its folder created, and not itself a folder (IsADirectoryError, exit 1)."""
    local_dir(path.parent, f"{flag}'s folder")
    if path.is_dir():
        raise InputError(f"{flag} {path} is a folder: give the path of the file to write")
    return path


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` to write to; it replaces `path` (os.replace) only once the block ends.

    A reader of a local --out (the demo, a dashboard, the next run's comparison) sees the previous complete file or
    the new one, never a truncated one: a full disk, a file-size limit or a job killed mid-write leaves the old file
    as it was (a SIGKILL may leave the hidden temporary beside it). Same folder: os.replace is atomic only within one
    filesystem. An OSError (no space, no permission) becomes an InputError naming the file: the CLIs exit 2, not 1
    with a traceback, which `drift --fail-on-drift` documents as "drift detected"."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _unwritable(path, exc) from exc
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the report from the other users of a shared folder
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _unwritable(path, exc) from exc
        raise


def _unwritable(path: Path, exc: OSError) -> InputError:
    kept = "the previous file is kept whole" if path.is_file() else "nothing was written"
    return InputError(
        f"could not write {path} ({type(exc).__name__}: {exc.strerror or exc}); {kept}. Free space on its "
        "filesystem or give an output this job may write"
    )


@contextmanager
def staged(out: str) -> Iterator[Path]:
    """A local folder to write the report into: `out` itself, or for a URL a temporary one uploaded to it."""
    if not is_url(out):
        yield local_dir(out)
        return
    with tempfile.TemporaryDirectory(prefix="monitoring-report-") as tmp:
        yield Path(tmp)
        upload(Path(tmp), out)


def upload(folder: Path, out: str) -> None:
    import fsspec  # lazily: s3fs/gcsfs/adlfs load on first use

    done: list[str] = []
    try:
        fs, root = fsspec.core.url_to_fs(out)
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            fs.put_file(str(path), f"{root.rstrip('/')}/{path.name}")
            done.append(path.name)
    # Any SDK's type: botocore's EndpointConnectionError and NoCredentialsError are no OSError, and ended the
    # job with a traceback and exit 1 (what --fail-on-drift documents as "drift detected").
    except Exception as exc:  # noqa: BLE001
        # A run into the same prefix replaces the last one's files: say which ones this run did replace.
        kept = f"; uploaded before the failure: {', '.join(done)}" if done else "; nothing was uploaded"
        raise InputError(
            f"could not write the report to {out}: {type(exc).__name__}: {exc}{kept}. Check the URL, that the "
            "object store is reachable and that this job's identity may write under that prefix"
        ) from exc
