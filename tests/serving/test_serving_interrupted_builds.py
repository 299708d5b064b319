"""A `serving build` killed part-way (SIGKILL, the OOM killer, a CI timeout's SIGTERM): the next build, pin and
serve go on from the versions repository.json lists, and nothing it lists is lost.

Each build runs in a real subprocess. The kills between the two renames and before the manifest write land
in windows of microseconds: the subprocess script wraps the real function and sends itself the signal there
(nothing in serving knows about it). The kill mid-copy is a real signal from the test while the build copies
a large graph data file."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from serving.errors import ConfigError
from serving.manifest import read_manifest
from serving.repository import MODELS, build, pin

# argv: bundle repo point signal [version]. Kills this build at `point` with `signal`, as an outside kill would land.
KILLED_BUILD = """
import json, os, signal, sys
from pathlib import Path
from serving import repository

bundle, repo, point, sig = sys.argv[1], sys.argv[2], sys.argv[3], getattr(signal, sys.argv[4])
real_rename, real_dumps = Path.rename, json.dumps

def rename(self, target):  # the first version folder placed, the second not yet
    moved = real_rename(self, target)
    if point == "between-renames":
        os.kill(os.getpid(), sig)
    return moved

def dumps(obj, *args, **kwargs):  # the manifest naming the new version is about to be written: the commit
    if point == "before-commit" and isinstance(obj, dict) and len(obj.get("versions") or {}) == 3:
        os.kill(os.getpid(), sig)
    return real_dumps(obj, *args, **kwargs)

Path.rename, json.dumps = rename, dumps
repository.build(bundle, repo, version=int(sys.argv[5]) if len(sys.argv) > 5 else None)
"""


def _build_killed(
    bundle: Path, repo: Path, point: str, sig: str = "SIGKILL", version: int | None = None
) -> int:
    done = subprocess.run(
        [sys.executable, "-c", KILLED_BUILD, str(bundle), str(repo), point, sig, *([str(version)] * bool(version))],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.returncode


def _version_folders(repo: Path) -> dict[str, list[str]]:
    return {m: sorted(p.name for p in (repo / m).iterdir() if p.is_dir()) for m in MODELS}


@pytest.fixture
def repo_with_two_versions(tiny_bundle: Path, tmp_path: Path) -> Path:
    repo = tmp_path / "models"
    build(tiny_bundle, repo)
    build(tiny_bundle, repo)
    return repo


@pytest.mark.parametrize("point", ["between-renames", "before-commit"])
@pytest.mark.parametrize("next_writer", ["build", "pin"])
def test_a_build_killed_before_its_commit_is_undone_by_the_next_build_or_pin(
    tiny_bundle: Path, repo_with_two_versions: Path, point: str, next_writer: str
) -> None:
    """Before: the next build refused classifier/3 as a stray ("delete it and build again"), and a pin kept it
    where Triton loads it (`serve` served the killed build's version as the newest)."""
    repo = repo_with_two_versions
    listed = read_manifest(repo)["versions"]
    assert _build_killed(tiny_bundle, repo, point) == -signal.SIGKILL
    assert "3" in _version_folders(repo)["classifier"], "the kill did not land after the first rename"
    assert read_manifest(repo)["versions"] == listed

    if next_writer == "build":
        assert build(tiny_bundle, repo) == 3
        assert read_manifest(repo)["versions"]["1"] == listed["1"]
        assert read_manifest(repo)["versions"]["2"] == listed["2"]
        assert _version_folders(repo) == {m: ["1", "2", "3"] for m in MODELS}
    else:
        pin(repo, None)
        assert read_manifest(repo)["versions"] == listed
        assert _version_folders(repo) == {m: ["1", "2"] for m in MODELS}
    assert not [p for p in repo.rglob("*") if p.name.endswith(".tmp") or p.name == ".build-pending.json"]


def _bundle_with_large_data(tiny_bundle: Path, tmp_path: Path) -> Path:
    """A graph with a large external data file (a real model's weights): copying it takes a while."""
    bundle = tmp_path / "large"
    shutil.copytree(tiny_bundle, bundle)
    with open(bundle / "model.onnx.data", "wb") as f:
        f.truncate(256 << 20)  # sparse here; the copy writes all of it
    return bundle


def _kill_mid_copy(bundle: Path, repo: Path, sig: signal.Signals) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "serving", "build", str(bundle), str(repo)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    copying = repo / "classifier" / ".3.tmp" / "model.onnx.data"
    try:
        deadline = time.monotonic() + 60
        while not copying.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert copying.exists(), proc.communicate()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (repo / "classifier" / "3").exists(), "the build got past its copies before the kill"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_sigterm_mid_copy_stops_the_build_and_leaves_nothing(
    tiny_bundle: Path, repo_with_two_versions: Path, tmp_path: Path
) -> None:
    """Before: Python's default SIGTERM ended the build without its cleanup (exit -15, staged folders left)."""
    repo = repo_with_two_versions
    listed = read_manifest(repo)["versions"]
    done = _kill_mid_copy(_bundle_with_large_data(tiny_bundle, tmp_path), repo, signal.SIGTERM)
    assert done.returncode == 130 and "interrupted" in done.stderr, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    assert _version_folders(repo) == {m: ["1", "2"] for m in MODELS}
    assert not [p for p in repo.rglob("*") if p.name.endswith(".tmp") or p.name == ".build-pending.json"]
    assert read_manifest(repo)["versions"] == listed


def test_sigkill_mid_copy_is_cleaned_by_the_next_build(
    tiny_bundle: Path, repo_with_two_versions: Path, tmp_path: Path
) -> None:
    repo = repo_with_two_versions
    done = _kill_mid_copy(_bundle_with_large_data(tiny_bundle, tmp_path), repo, signal.SIGKILL)
    assert done.returncode == -signal.SIGKILL
    # A build with another version number (the staged .3.tmp is not its own) leaves nothing behind either.
    assert build(tiny_bundle, repo, version=5) == 5
    assert _version_folders(repo) == {m: ["1", "2", "5"] for m in MODELS}
    assert not [p for p in repo.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.integration
def test_serve_after_a_killed_build_loads_the_listed_versions_only(
    tiny_bundle: Path, repo_with_two_versions: Path
) -> None:
    """Before: Triton loaded sentiment/3 of the killed build (its folders and configs were in place) as the
    newest version, a version repository.json does not know."""
    from serving.client import SentimentClient
    from tests.serving.conftest import tritonserver_missing
    from tests.serving.serve_cli import serve_cli

    if reason := tritonserver_missing():
        pytest.skip(reason)
    repo = repo_with_two_versions
    assert _build_killed(tiny_bundle, repo, "before-commit") == -signal.SIGKILL
    with serve_cli(repo) as serve:
        with SentimentClient(serve.http_url) as client:
            assert client.ready_versions("sentiment") == [1, 2]
            assert client.classify(["fine"])[0].label in ("negative", "positive")
        assert any("removed version 3" in line for line in serve.lines), serve.lines
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=60) == 0
    assert json.loads((repo / "repository.json").read_text())["pinned"] is None
    assert os.listdir(repo / "sentiment") == os.listdir(repo / "classifier")


def _old_build_killed(bundle: Path, repo: Path, version: int | None = None) -> None:
    """What a build of a serving from before `.build-pending.json` left when killed before its commit."""
    assert _build_killed(bundle, repo, "before-commit", version=version) == -signal.SIGKILL
    (repo / ".build-pending.json").unlink()


def test_a_version_folder_no_build_named_is_refused_unless_a_pin_leaves_it_unloaded(
    tiny_bundle: Path, repo_with_two_versions: Path
) -> None:
    """Before: the next build made version 3 beside the unlisted 7 (Triton then served 7 and 3), and `pin latest`
    put 7 back in service. A pin to a listed version keeps 7 unloaded: allowed (a rollback is never blocked)."""
    repo = repo_with_two_versions
    _old_build_killed(tiny_bundle, repo, version=7)
    for action in (lambda: build(tiny_bundle, repo), lambda: pin(repo, None)):
        with pytest.raises(ConfigError, match=r"classifier/7, .*sentiment/7 already exist but .*repository.json "
                           r"does not list version 7 .*Delete the folders \(rm -r .*classifier/7 .*sentiment/7\)"):  # fmt: skip
            action()
    pin(repo, 2)
    assert read_manifest(repo)["pinned"] == 2
    assert _version_folders(repo) == {m: ["1", "2", "7"] for m in MODELS}  # never removed: nothing says whose
    for model in MODELS:
        shutil.rmtree(repo / model / "7")  # the fix the message names
    pin(repo, None)
    assert build(tiny_bundle, repo) == 3


@pytest.mark.integration
def test_serve_and_check_refuse_a_version_folder_the_manifest_does_not_list(
    tiny_bundle: Path, repo_with_two_versions: Path
) -> None:
    """Before: `serve` loaded the old build's sentiment/3 as the newest version, which nothing records, and
    `check --repo` checked it. Pinned to a listed version, the repository serves only that one."""
    from serving.client import SentimentClient
    from tests.serving.conftest import tritonserver_missing
    from tests.serving.serve_cli import serve_cli

    if reason := tritonserver_missing():
        pytest.skip(reason)
    repo = repo_with_two_versions
    _old_build_killed(tiny_bundle, repo)
    try:
        with serve_cli(repo) as serve, SentimentClient(serve.http_url) as client:
            served = client.ready_versions("sentiment")
        pytest.fail(f"serve started, serving sentiment versions {served}")
    except AssertionError as exc:  # serve_cli: the CLI exited before "Ctrl-C to stop."; its output
        refusals = [str(exc)]
    check = [sys.executable, "-m", "serving", "check", "--repo", str(repo)]
    done = subprocess.run(check, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert refusals[0].startswith("error: "), refusals  # main() prints it and exits 2
    for output in (*refusals, done.stderr):
        assert "classifier/3, " in output and "sentiment/3 already exist but" in output, output
        assert "does not list version 3" in output and "Triton would serve that version" in output, output
    pin(repo, 2)
    with serve_cli(repo) as serve, SentimentClient(serve.http_url) as client:
        assert client.ready_versions("sentiment") == client.ready_versions("classifier") == [2]
        assert client.classify(["fine"])[0].label in ("negative", "positive")
    assert _version_folders(repo) == {m: ["1", "2", "3"] for m in MODELS}
