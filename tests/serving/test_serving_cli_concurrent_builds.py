"""Two writers of one repository at once: two `serving build`s (two pipeline runs, a manual build beside CI's),
a `serving pin` (a rollback) during a build."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from serving import repository
from serving.manifest import read_manifest, versions
from serving.repository import build


@contextlib.contextmanager
def build_held_mid_copy(
    bundle: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, object]]:
    """`build(bundle, repo)` in a thread named "first", held mid-copy (a big tokenizer/graph on a slow disk)
    until the block ends; yields the dict where each thread run by `run_build` stores what it ended with."""
    first_copying, release = threading.Event(), threading.Event()
    real_copytree = shutil.copytree

    def slow_copytree(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "first":
            first_copying.set()
            release.wait(30)
        return real_copytree(src, dst, *args, **kwargs)

    monkeypatch.setattr(repository.shutil, "copytree", slow_copytree)
    results: dict[str, object] = {}
    first = run_build(results, "first", bundle, repo)
    try:
        assert first_copying.wait(30)
        yield results
    finally:
        release.set()
        first.join(60)


def run_build(results: dict[str, object], name: str, bundle: Path, repo: Path) -> threading.Thread:
    def run() -> None:
        try:
            results[name] = build(bundle, repo)
        except Exception as exc:  # noqa: BLE001 - the test reports what each build ended with
            results[name] = exc

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


def test_a_build_started_during_another_waits_and_takes_the_next_version(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both took version latest + 1 and staged it in the same `.N.tmp` folders, deleting each other's files:
    one died with 'Directory not empty' (exit 1) or a missing file, and the survivor's version could mix both
    bundles' files. Now the second waits for the first (serving/manifest.py) and builds the next version."""
    repo = tmp_path / "models"
    build(tiny_bundle, repo)
    other = tmp_path / "other"
    shutil.copytree(tiny_bundle, other)
    meta = json.loads((other / "metadata.json").read_text())
    (other / "metadata.json").write_text(json.dumps({**meta, "model_version": "other"}))

    with build_held_mid_copy(tiny_bundle, repo, monkeypatch) as results:
        second = run_build(results, "second", other, repo)
        time.sleep(1.5)  # the second build's whole run takes well under this on its own
    second.join(60)
    assert results == {"first": 2, "second": 3}, results
    assert versions(repo) == [1, 2, 3]
    manifest = read_manifest(repo)
    for v in ("2", "3"):
        bundle = Path(manifest["versions"][v]["bundle"])
        for model in ("sentiment",):
            assert (repo / model / v / "metadata.json").read_bytes() == (
                bundle / "metadata.json"
            ).read_bytes()
        assert (repo / "classifier" / v / "model.onnx").read_bytes() == (bundle / "model.onnx").read_bytes()
    assert not [p for p in (repo / "sentiment").iterdir() if p.name.endswith(".tmp")]


def test_a_pin_started_during_a_build_waits_and_keeps_the_builds_version(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pin that read repository.json before the build wrote it wrote it back without the new version: the
    build's version folders stayed on disk, unlisted, and the next build refused them as strays."""
    repo = tmp_path / "models"
    build(tiny_bundle, repo)
    with build_held_mid_copy(tiny_bundle, repo, monkeypatch) as results:
        pinning = subprocess.Popen(
            [sys.executable, "-m", "serving", "pin", str(repo), "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(3)  # a pin's whole run (interpreter start included) takes well under this on its own
        assert pinning.poll() is None, pinning.communicate()  # waiting for the build, not done without it
    out, err = pinning.communicate(timeout=60)
    assert pinning.returncode == 0, err
    assert f"waiting for the build or pin by pid {os.getpid()}" in err
    assert results == {"first": 2}, results
    manifest = read_manifest(repo)
    assert sorted(manifest["versions"]) == ["1", "2"] and manifest["pinned"] == 1
    assert "versions: [1]" in (repo / "sentiment" / "config.pbtxt").read_text()
    assert build(tiny_bundle, repo) == 3  # no version folder left unlisted for it to refuse
