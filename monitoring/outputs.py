"""Where a job writes its report: a local folder, or an object-storage prefix (s3://, gs://, abfs://, az://).

The scheduled drift job is given its bucket's drift prefix (infra/k8s/monitoring_stack.py) and runs with a
read-only root filesystem: a URL must never become a local folder named `s3:`. The report is written to a
private temporary folder (the pod's scratch /tmp) and uploaded once complete, so a reader of the prefix
never sees half a report.
"""

from __future__ import annotations

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


@contextmanager
def staged(out: str) -> Iterator[Path]:
    """A local folder to write the report into: `out` itself, or for a URL a temporary one uploaded to it."""
    if not is_url(out):
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="monitoring-report-") as tmp:
        yield Path(tmp)
        upload(Path(tmp), out)


def upload(folder: Path, out: str) -> None:
    import fsspec  # lazily: s3fs/gcsfs/adlfs load on first use

    try:
        fs, root = fsspec.core.url_to_fs(out)
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            fs.put_file(str(path), f"{root.rstrip('/')}/{path.name}")
    except (OSError, ValueError, ImportError) as exc:
        raise InputError(
            f"could not write the report to {out}: {type(exc).__name__}: {exc}. Check the URL and that this "
            "job's identity may write under that prefix"
        ) from exc
