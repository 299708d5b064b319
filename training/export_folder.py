"""The bundle's folder: what `--out` may replace, and how a finished bundle takes its place."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path

from training.export_errors import ExportError


def check_out(out_dir: Path, model_dir: Path) -> None:
    """Refuse an `out_dir` whose replacement would delete something that is not an earlier bundle.

    `--out runs/demo` (the run folder rather than runs/demo/export) used to delete the whole run, the model
    being exported, its metrics and checkpoints included, and exit 0."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"--out {out_dir} is a file: pass a folder for the bundle (nothing was written)")
    for parent in out_dir.parents:
        if parent.exists() and not parent.is_dir():
            raise ExportError(f"--out {out_dir}: {parent} is a file, not a folder: pass another --out")
    out, model = out_dir.resolve(), model_dir.resolve()
    if out == model or out in model.parents:
        raise ExportError(
            f"--out {out_dir} holds the model folder {model_dir}: replacing it would delete the model; "
            "pass a folder of its own, e.g. the run's export/ (nothing was written)"
        )
    if out_dir.is_dir() and any(out_dir.iterdir()) and not _is_bundle(out_dir):
        raise ExportError(
            f"--out {out_dir} is a folder that is not an export bundle (no metadata.json with a format_version): "
            "it would be replaced as a whole, so pass a new or empty folder, or the earlier bundle to replace "
            "(nothing was written or deleted)"
        )


def _is_bundle(folder: Path) -> bool:
    try:
        meta = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "format_version" in meta


def swap_into_place(staging: Path, out_dir: Path) -> None:
    """Rename the finished bundle into place; an earlier bundle is moved aside first and deleted after.

    Deleting the old one first (as before) left readers (a `serving build` of the same path) a half-deleted
    bundle, or none, for as long as the deletion took, and a second export finishing at the same moment
    failed its rename with a traceback."""
    retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old.", dir=out_dir.parent))
    try:
        for attempt in range(5):  # another export may put its bundle there between our two renames
            with contextlib.suppress(FileNotFoundError):  # none there, or another export moved it
                out_dir.rename(retired / str(attempt))
            try:
                staging.rename(out_dir)
                return
            except OSError:
                if attempt == 4 or not out_dir.exists():
                    raise
    except BaseException:
        first = retired / "0"
        if first.exists() and not out_dir.exists():
            first.rename(out_dir)  # put the earlier bundle back
        raise
    finally:
        shutil.rmtree(retired, ignore_errors=True)
