"""Two `serving build`s into one repository at once (two pipeline runs, a manual build beside CI's)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from serving import repository
from serving.manifest import read_manifest, versions
from serving.repository import build


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

    first_copying, release = threading.Event(), threading.Event()
    real_copytree = shutil.copytree

    def slow_copytree(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "first":
            first_copying.set()
            release.wait(30)  # a big tokenizer/graph on a slow disk: the first build is mid-copy
        return real_copytree(src, dst, *args, **kwargs)

    monkeypatch.setattr(repository.shutil, "copytree", slow_copytree)
    results: dict[str, object] = {}

    def run(name: str, bundle: Path) -> None:
        try:
            results[name] = build(bundle, repo)
        except Exception as exc:  # noqa: BLE001 - the test reports what each build ended with
            results[name] = exc

    first = threading.Thread(target=run, args=("first", tiny_bundle), name="first")
    second = threading.Thread(target=run, args=("second", other), name="second")
    first.start()
    assert first_copying.wait(30)
    second.start()
    time.sleep(1.5)  # the second build's whole run takes well under this on its own
    release.set()
    first.join(60)
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
