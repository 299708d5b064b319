"""Tests write under tmp_path, never into the checkout. A file a test leaves in the repository's tree is work lost
to the next `git add -A` or a test reading its own leftovers: test_pipeline_dag wrote a promotion's drift reference
into ./unused-by-the-fake/ whenever its candidate won. The session notes the untracked files git does not ignore
when it starts; at its end any new one fails the run, named (ignored outputs such as runs/ and reports/ are the
commands' own and are not counted)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def untracked(root: Path = ROOT) -> frozenset[str] | None:
    """Untracked, not ignored paths under `root` (git's porcelain names); None outside a git checkout."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "ls-files", "--others", "--exclude-standard", "-z"],
            capture_output=True, timeout=60, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return frozenset(p for p in proc.stdout.decode(errors="replace").split("\0") if p)


def new_since(before: frozenset[str] | None, root: Path = ROOT) -> list[str]:
    after = untracked(root)
    if before is None or after is None:
        return []
    return sorted(after - before)
