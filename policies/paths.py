"""Paths as the reports print them, so a report names the same files in every checkout."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def shown(path: str | os.PathLike[str]) -> str:
    """`path` relative to the repository root when it lies inside it, else relative to the current folder when it
    lies inside that, else absolute. Absolute paths (/work/main/policies/waivers.yaml, /tmp/.../plans/dev.json)
    made two runs over the same inputs byte-identical only within one folder: a reviewer re-running a signed
    report in another clone got other bytes. The repository root comes first: SARIF and a reader both want
    `infra/...`, not a path relative to wherever the command ran."""
    given = Path(path)
    cwd = Path.cwd()
    # As written (a plan reached through a symlinked folder keeps its name), then with links resolved.
    candidates = (Path(os.path.abspath(given)), given.resolve())
    for base in (REPO_ROOT, cwd.resolve(), Path(os.path.abspath(cwd))):
        for full in candidates:
            if full.is_relative_to(base):
                return full.relative_to(base).as_posix()
    return str(candidates[0])
