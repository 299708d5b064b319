"""The monitoring CLIs' other local outputs are replaced whole or not at all, like drift.json/html.

`evaluate` wrote DIR/quality.json, `reference` its --out .jsonl and `texts` its --out in place: a write that failed
(a full disk, a file-size limit) left the previous file truncated, and the CLI ended in a traceback and exit 1 (what
`drift --fail-on-drift` documents as "drift detected"). A truncated reference is worse than none: the next drift run
reads it as a smaller reference and judges the window against it. Each is now written beside its target and moved
over it once complete (monitoring/outputs.py `replacing`); a failed write is exit 2 naming the file.

RLIMIT_FSIZE stands for the full disk (the kernel refuses the bytes past the limit: EFBIG), in a child process that
runs the real CLI; only the minutes of work before the write (the endpoint, the model) are replaced by their result.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The child's first lines: the file-size limit (argv[1]) for every file it writes.
LIMIT = textwrap.dedent(
    """
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal's core dump
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
    """
)
QUALITY = {
    "rows": 500,
    "measured": {"accuracy": 0.71, "f1": 0.69, "auc": 0.77},
    "training": {"accuracy": 0.88, "f1": 0.86, "auc": 0.93},
    "delta": {"accuracy": -0.17, "f1": -0.17, "auc": -0.16},
}


def run_limited(limit: int, *argv: object, patch: str = "") -> subprocess.CompletedProcess:
    """The real CLI under the limit; `patch` first stands in for the work before the write."""
    cli = "from monitoring.cli import main\nsys.exit(main(sys.argv[2:]))\n"
    return run_script(limit, textwrap.dedent(patch).strip() + "\n" + cli, *argv)


def run_script(limit: int, body: str, *argv: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", LIMIT + body, str(limit), *map(str, argv)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def assert_kept(done: subprocess.CompletedProcess, path: Path, previous: str) -> None:
    assert path.read_text() == previous, "the previous file was truncated by the failed write"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name], "a temporary file was left"
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"could not write {path}" in done.stderr and "the previous file is kept whole" in done.stderr


def test_texts_cut_by_a_full_disk_keeps_the_previous_window(tmp_path: Path) -> None:
    out = tmp_path / "windows" / "shifted.txt"
    out.parent.mkdir()
    previous = "a previous window of texts\n" * 3
    out.write_text(previous)
    done = run_limited(2048, "texts", "--shifted", "--rows", "300", "--out", out)
    assert_kept(done, out, previous)


def test_a_reference_cut_by_a_full_disk_keeps_the_previous_reference(tmp_path: Path) -> None:
    out = tmp_path / "ref" / "reference.jsonl"
    out.parent.mkdir()
    previous = json.dumps({"n_tokens": 12, "prediction": "positive"}) + "\n"
    out.write_text(previous * 50)
    patch = """
    from monitoring import reference
    reference.build = lambda *a, **k: [{"n_tokens": i, "prediction": "negative", "emb": [0.5] * 16} for i in range(200)]
    """
    done = run_limited(4096, "reference", "--manifest", "m.json", "--bundle", "b", "--out", out, patch=patch)
    assert_kept(done, out, previous * 50)


def test_quality_cut_by_a_full_disk_keeps_the_previous_quality_report(tmp_path: Path) -> None:
    out = tmp_path / "evaluate"
    out.mkdir()
    previous = json.dumps({**QUALITY, "rows": 499}, indent=2) + "\n"
    (out / "quality.json").write_text(previous)
    patch = f"""
    from monitoring import evaluate
    evaluate.run = lambda *a, **k: {QUALITY!r}
    """
    # 64 bytes: less than the report, so the write fails whatever its size
    done = run_limited(64, "evaluate", "--url", "127.0.0.1:1", "--manifest", "m.json", "--bundle", "b",
                       "--out", out, patch=patch)  # fmt: skip
    assert_kept(done, out / "quality.json", previous)


def test_gauges_cut_by_a_full_disk_keep_the_previous_metrics_prom(tmp_path: Path) -> None:
    """Every job's DIR/metrics.prom was replaced whole already (prometheus_client's write_to_textfile), but a failed
    write was a traceback and exit 1."""
    previous = 'ml_drift_score{model="sentiment"} 0.1\n'
    (tmp_path / "metrics.prom").write_text(previous)
    body = textwrap.dedent(
        """
        from pathlib import Path
        from monitoring import metrics
        from monitoring.errors import InputError
        try:
            metrics.export(metrics.DRIFT_JOB, {"model": "sentiment"}, metrics.drift_gauges("sentiment", 0.5, 0.3, True),
                           out_dir=Path(sys.argv[2]), pushgateway=None)
        except InputError as exc:  # what the CLIs print before they exit 2
            sys.exit(f"refused: {exc}")
        """
    )
    done = run_script(64, body, tmp_path)
    assert (tmp_path / "metrics.prom").read_text() == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.prom"], "a temporary file was left"
    assert "refused: could not write" in done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize("command", ["texts", "reference"])
def test_a_complete_write_replaces_the_file_readable_by_others(tmp_path: Path, command: str) -> None:
    out = tmp_path / "out.txt"
    out.write_text("previous\n")
    patch = "from monitoring import reference\nreference.build = lambda *a, **k: [{'n_tokens': 3}]"
    argv = (
        ["texts", "--shifted", "--rows", "5", "--out", out]
        if command == "texts"
        else ["reference", "--manifest", "m.json", "--bundle", "b", "--out", out]
    )
    done = run_limited(1 << 30, *argv, patch=patch)
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_text() != "previous\n" and out.read_text().endswith("\n")
    assert out.stat().st_mode & 0o044 == 0o044
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
