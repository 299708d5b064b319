"""A local drift report is replaced whole or not at all.

`python -m monitoring drift --out DIR` wrote DIR/drift.json and DIR/drift.html in place: a write that failed (a full
disk, a file-size limit, Evidently raising while it renders the HTML after opening the file) left the previous
report truncated or empty, and a reader between open and the last byte saw half a file. Each file is now written
beside its target and moved over it (os.replace) once complete.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from monitoring import drift

PREVIOUS = {"drift_detected": False, "score": 0.0, "threshold": 0.3, "run": "previous"}


class Snapshot:
    """Evidently's Snapshot.save_html as far as the writer sees it: it opens the path given, then renders."""

    def __init__(self, html: str, fail: bool = False) -> None:
        self.html, self.fail = html, fail

    def save_html(self, filename: str) -> None:
        with open(filename, "w", encoding="utf-8") as fh:
            if self.fail:
                raise ValueError("rendering failed")
            fh.write(self.html)


def previous_report(out: Path) -> None:
    drift.write(drift.DriftResult(report=PREVIOUS, snapshot=Snapshot("<html>previous</html>")), out)


def assert_previous_intact(out: Path) -> None:
    assert json.loads((out / "drift.json").read_text()) == PREVIOUS
    assert (out / "drift.html").read_text() == "<html>previous</html>"
    assert sorted(p.name for p in out.iterdir()) == ["drift.html", "drift.json"], "a temporary file was left"


def test_a_write_cut_by_the_file_size_limit_leaves_the_previous_report(tmp_path: Path) -> None:
    """RLIMIT_FSIZE stands for a full disk: the kernel refuses the bytes past the limit (EFBIG)."""
    out = tmp_path / "out"
    previous_report(out)
    script = textwrap.dedent(
        """
        import resource, signal, sys
        from pathlib import Path
        from monitoring import drift
        from monitoring.errors import InputError

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal's core dump
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        big = {"drift_detected": True, "score": 0.5, "features": {f"f{i}": "x" * 64 for i in range(400)}}
        try:
            drift.write(drift.DriftResult(report=big, snapshot=None), Path(sys.argv[1]))
        except InputError as exc:  # the CLIs' exit 2, naming the file; the kernel's EFBIG is its cause
            print(f"refused: {exc} / {exc.__cause__.strerror}")
            sys.exit(3)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "the previous file is kept whole" in done.stdout, done.stdout
    assert_previous_intact(out)


def test_an_html_render_that_fails_after_opening_leaves_the_previous_html(tmp_path: Path) -> None:
    out = tmp_path / "out"
    previous_report(out)
    new: dict[str, Any] = {**PREVIOUS, "run": "new"}
    with pytest.raises(ValueError, match="rendering failed"):
        drift.write(drift.DriftResult(report=new, snapshot=Snapshot("<html>new</html>", fail=True)), out)
    # drift.json of the new run is complete (it was written first); the HTML is still the previous one, whole.
    assert json.loads((out / "drift.json").read_text()) == new
    assert (out / "drift.html").read_text() == "<html>previous</html>"
    assert sorted(p.name for p in out.iterdir()) == ["drift.html", "drift.json"]


def test_a_complete_write_replaces_both_files_readable_by_others(tmp_path: Path) -> None:
    out = tmp_path / "out"
    previous_report(out)
    new = {**PREVIOUS, "run": "new"}
    drift.write(drift.DriftResult(report=new, snapshot=Snapshot("<html>new</html>")), out)
    assert json.loads((out / "drift.json").read_text()) == new
    assert (out / "drift.html").read_text() == "<html>new</html>"
    assert all((out / n).stat().st_mode & 0o044 == 0o044 for n in ("drift.json", "drift.html"))
