"""The demo's two folders (<reports>/demo and --work): checked, claimed and emptied before the first stage.

Each run starts from empty folders, so nothing of an earlier run (a champion in the model store, an old
promotion record, last run's metrics) is read as this run's. Emptying a folder the user pointed at by mistake
(`--reports .` names the repository's own demo/ package, `--work ~` a home folder) would lose their files, so
a folder is emptied only when it is empty, carries the demo's claim file, or holds nothing but what a demo run
writes there (runs before the claim file existed). The claim file also holds a lock for as long as the run
lasts: a second `make demo` on the same folders stops at once instead of emptying them under the first.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

CLAIM = ".eu-ml-demo"
# What a run writes into each folder (pipeline.py, monitor.py, stages.py): a folder holding only these is a
# previous run's, whichever version of the demo wrote it.
RUN_ENTRIES = {
    "work": {"train", "model-repo", "model-store", "registry", "monitoring"},
    "reports": {"summary.json", "index.html", "logs", "loadtest.json", "promotion-record.json", "model-card.md",
                "monitoring"},
}  # fmt: skip


class BadPath(Exception):
    """A --reports/--work the demo cannot use; the message says what to change (exit 2, nothing removed)."""


def _inside(a: Path, b: Path) -> bool:
    return a == b or b in a.parents


def _check(folder: Path, flag: str, kind: str) -> None:
    if folder.exists() and not folder.is_dir():
        raise BadPath(f"{flag}: {folder} is a file, not a folder: pass a folder (it is created if missing)")
    if folder.is_dir():
        entries = {p.name for p in folder.iterdir()} - {CLAIM}
        if (folder / CLAIM).exists():
            return
        foreign = sorted(entries - RUN_ENTRIES[kind])
        if foreign:
            raise BadPath(
                f"{flag}: {folder} holds files a demo run did not write ({', '.join(foreign[:5])}"
                f"{', ...' if len(foreign) > 5 else ''}) and each run empties it: pass an empty or new folder"
            )


def _claim(folder: Path, flag: str) -> IO[str]:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        claim = (folder / CLAIM).open("a+")
    except OSError as exc:
        raise BadPath(f"{flag}: cannot write to {folder} ({exc.strerror}): pass a writable folder") from exc
    try:
        fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        claim.seek(0)
        owner = claim.read().strip() or "unknown"
        claim.close()
        raise BadPath(
            f"{flag}: another demo run (pid {owner}) is using {folder}: wait for it to finish, or give this "
            "run other folders (--reports, --work)"
        ) from None
    claim.seek(0)
    claim.truncate()
    claim.write(f"{os.getpid()}\n")
    claim.flush()
    return claim


def _empty(folder: Path, flag: str) -> None:
    for entry in folder.iterdir():
        if entry.name == CLAIM:
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError as exc:
            # Left in place it would be read as this run's (a champion in the model store, an old record).
            raise BadPath(
                f"{flag}: cannot remove {entry} from the previous run ({exc.strerror}): remove it, or pass "
                "another folder"
            ) from exc


@contextmanager
def claimed(cfg: Any) -> Iterator[None]:
    """Check, lock and empty cfg.out and cfg.work for the duration of the run; BadPath says what to fix."""
    out, work = Path(os.path.abspath(cfg.out)), Path(os.path.abspath(cfg.work))
    if _inside(out, work) or _inside(work, out):
        raise BadPath(
            f"--work {cfg.work} and --reports {cfg.reports} overlap ({out} is emptied on each run, as is the "
            "work folder): pass folders apart"
        )
    if _inside(Path.cwd(), work) or _inside(Path.cwd(), out):
        raise BadPath(f"--work/--reports would empty the current folder {Path.cwd()}: pass another folder")
    folders = ((out, "--reports", "reports"), (work, "--work", "work"))
    for folder, flag, kind in folders:
        _check(folder, flag, kind)
    with ExitStack() as stack:
        for folder, flag, _ in folders:
            stack.callback(_claim(folder, flag).close)
        for folder, flag, _ in folders:
            _empty(folder, flag)
        yield


def model_repository(cfg: Any, live: dict[str, Any]) -> Path:
    """<work>/model-repo, unless its path holds whitespace: Triton's python backend launches each model's stub
    with the model's path unquoted (triton-inference-server/python_backend#401), so every model under a path
    with a space crashed on load ("what(): stol") and the serve stage failed after training. Then a temporary
    folder, removed when the run ends."""
    repo = cfg.work / "model-repo"
    if not any(c.isspace() for c in str(repo.resolve())):
        return repo
    live["repo_tmp"] = tmp = Path(tempfile.mkdtemp(prefix="eu-ml-demo-models-"))
    if any(c.isspace() for c in str(tmp)):
        raise RuntimeError(
            f"Triton cannot load models from a path with spaces ({repo.resolve()}, {tmp}): pass a --work "
            "without spaces or set TMPDIR to a folder without spaces"
        )
    return tmp / "model-repo"
