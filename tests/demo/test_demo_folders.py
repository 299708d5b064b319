"""--reports and --work as a newcomer types them: mistakes lose nothing, leftovers are never read as this run's.

Each run empties <reports>/demo and --work. It emptied whatever they named: `--reports .` deleted the
repository's demo/ package, a work folder with the user's files lost them, leftovers it could not remove were
silently kept (a previous run's model store then held a champion), and a second `make demo` emptied the
folders of the one still running. The preflight is stopped by the test (exit 1), so no stage runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from demo import paths, pipeline
from demo.pipeline import DemoConfig

ROOT = Path(__file__).resolve().parents[2]
STOPPED = "stub (the test stops the demo at its preflight)"


def _demo(monkeypatch: pytest.MonkeyPatch, reports: Path, work: Path) -> int:
    monkeypatch.setattr(pipeline, "missing_tools", lambda: [STOPPED])
    return pipeline.run(DemoConfig(reports=reports, work=work, fast=True, quiet=True))


@contextmanager
def _immutable(path: Path) -> Iterator[None]:
    """Read-only even for root (the tests may run as root, whom chmod does not stop)."""
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False).returncode != 0:
        pytest.skip("chattr +i is not available on this file system")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_reports_naming_the_repository_deletes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--reports .` from the repository root: <reports>/demo is the demo package's own source folder."""
    repo = tmp_path / "repo"
    (repo / "demo").mkdir(parents=True)
    (repo / "demo" / "__init__.py").write_text("# source\n")
    assert _demo(monkeypatch, repo, tmp_path / "work") == 2
    assert (repo / "demo" / "__init__.py").read_text() == "# source\n"
    err = capsys.readouterr().err
    assert "--reports" in err and "__init__.py" in err and "empty or new folder" in err


def test_a_work_folder_holding_other_files_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    assert _demo(monkeypatch, tmp_path / "reports", home) == 2
    assert (home / "thesis.tex").read_text() == "years of work"
    assert "--work" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["reports", "work"])
def test_a_file_instead_of_a_folder_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    folders = {"reports": tmp_path / "reports", "work": tmp_path / "work", flag: file}
    assert _demo(monkeypatch, folders["reports"], folders["work"]) == 2
    assert file.read_text() == "mine"
    assert f"--{flag}" in capsys.readouterr().err


def test_a_read_only_reports_folder_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    with _immutable(reports):
        assert _demo(monkeypatch, reports, tmp_path / "work") == 2
    assert "cannot write" in capsys.readouterr().err


def test_overlapping_folders_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--work inside <reports>/demo (or the reverse): emptying one would empty the other."""
    assert _demo(monkeypatch, tmp_path / "reports", tmp_path / "reports" / "demo" / "work") == 2
    assert _demo(monkeypatch, tmp_path / "reports", tmp_path / "reports") == 2


def test_a_previous_runs_leftovers_are_gone_relative_paths_with_spaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    reports, work = Path("my reports"), Path("my runs/demo")
    (work / "model-store" / "sentiment").mkdir(parents=True)
    (work / "model-store" / "sentiment" / "champion.json").write_text("{}")
    (reports / "demo").mkdir(parents=True)
    (reports / "demo" / "promotion-record.json").write_text('{"decision": "promote"}')
    (reports / "demo" / "summary.json").write_text('{"promotion": {"decision": "promote"}}')
    assert _demo(monkeypatch, reports, work) == 1
    assert not (work / "model-store").exists() and not (reports / "demo" / "promotion-record.json").exists()
    summary = json.loads((reports / "demo" / "summary.json").read_text())
    assert "promotion" not in summary and summary["failed_stage"]["name"] == "preflight"


def test_a_stop_signal_while_emptying_the_previous_run_stops_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real stop signal to this process while a previous run's folder is being removed: exit 130 with a line
    saying what happened (it was a traceback), and the folders are free for the next run. SIGTERM takes Ctrl-C's
    path (demo.stages.STOP_SIGNALS); SIGINT itself is ignored in a shell's background jobs, as CI may run this."""
    work = tmp_path / "work"
    for name in ("model-store", "train"):
        (work / name).mkdir(parents=True)
        (work / name / "f").write_text("x")
    real_rmtree = paths.shutil.rmtree

    def rmtree_interrupted(path: Path, *args: object, **kwargs: object) -> None:
        real_rmtree(path)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises KeyboardInterrupt before this ends

    monkeypatch.setattr(paths.shutil, "rmtree", rmtree_interrupted)
    assert _demo(monkeypatch, tmp_path / "reports", work) == 130
    err = capsys.readouterr().err
    assert "before any stage started" in err and "Traceback" not in err
    monkeypatch.setattr(paths.shutil, "rmtree", real_rmtree)
    assert (
        _demo(monkeypatch, tmp_path / "reports", work) == 1
    )  # the stub preflight: claimed and emptied again
    assert not (work / "model-store").exists() and not (work / "train").exists()


def test_leftovers_that_cannot_be_removed_stop_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A previous run's model store that stays would hold a champion this run compares with."""
    store = tmp_path / "work" / "model-store"
    store.mkdir(parents=True)
    (store / "champion.json").write_text("{}")
    with _immutable(store):
        code = _demo(monkeypatch, tmp_path / "reports", tmp_path / "work")
    assert code == 2
    assert "model-store" in capsys.readouterr().err


FIRST = """
import sys, time
from pathlib import Path
import demo.pipeline as p

p.missing_tools = lambda: []
def policy(r, cfg, summary):
    with r.stage("policy", "held by the test"):
        cfg.work.mkdir(parents=True, exist_ok=True)
        (cfg.work / "mine").write_text("first run")
        while not (cfg.work / "release").exists():
            time.sleep(0.05)
        r.fail("released by the test")
p.stage_policy = policy
sys.exit(p.run(p.DemoConfig(reports=Path(sys.argv[1]), work=Path(sys.argv[2]), fast=True, quiet=True)))
"""


def test_a_second_demo_on_the_same_folders_leaves_the_first_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reports, work = tmp_path / "reports", tmp_path / "work"
    first = subprocess.Popen(
        [sys.executable, "-c", FIRST, str(reports), str(work)], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (work / "mine").exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (work / "mine").exists(), first.communicate()[0] if first.poll() is not None else "no start"
        assert _demo(monkeypatch, reports, work) == 2
        assert "another demo run" in capsys.readouterr().err
        assert (work / "mine").read_text() == "first run"
        (work / "release").write_text("")
        out = first.communicate(timeout=60)[0]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 1, out
    summary = json.loads((reports / "demo" / "summary.json").read_text())
    assert summary["failed_stage"]["why"] == "released by the test"


@pytest.mark.integration
def test_a_work_folder_with_spaces_still_serves(tmp_path: Path) -> None:
    """`--work "/home/Ana María/runs"`: the real tritonserver's python backend crashed loading every model from
    a repository under a path with a space ("what(): stol"), failing the serve stage after training."""
    import shutil

    from serving.repository import build
    from serving.server import TritonServer, wheel_root
    from training.export import make_tiny_bundle

    try:
        wheel_root()
    except Exception as exc:  # noqa: BLE001 - the wheel's own message
        pytest.skip(f"tritonserver is not installed: {exc}")
    cfg = DemoConfig(reports=tmp_path / "reports", work=tmp_path / "my work")
    live: dict = {}
    try:
        repo = paths.model_repository(cfg, live)
        build(make_tiny_bundle(tmp_path / "bundle" / "export", seed=0), repo)
        # Ready means every model loaded (the crash left it unready until the timeout).
        with TritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, ready_timeout_s=90) as server:
            assert server.process is not None and server.process.poll() is None
    finally:
        if "repo_tmp" in live:
            shutil.rmtree(live["repo_tmp"])
