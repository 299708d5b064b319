"""The serving image's build key follows what its model is made from, not the repository `serving build`
writes (which carries the time it ran): the same bundle built again gets the same key, so a rebuild of the same
commit reuses its tag instead of being refused as "built from other inputs" (locally, and by the registry on a CI
rerun); another bundle gets another key.

The real entry point up to the image build (real `serving build` of a real tiny bundle); the build itself is
replaced by a probe that records the key and stops.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from containers import build
from containers.model_repository import model_inputs
from containers.version import Version

VERSION = Version("0.1.0", "abc1234")


class _Built(Exception):
    pass


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from training.export import make_tiny_bundle

    folder = tmp_path_factory.mktemp("bundle")
    yield make_tiny_bundle(folder / "export", seed=0)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow  # the tiny bundle is a real PyTorch export: ~30 s on 2 busy cores
def test_the_same_bundle_built_twice_gets_the_same_build_key(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys: list[str] = []

    def probe(spec: Any, **_: Any) -> Any:
        keys.append(spec.build_key)
        raise _Built

    monkeypatch.setattr(build, "build_image", probe)
    # The tree changes under other jobs: a fixed version. NVIDIA's base by its pinned digest (never pulled): the
    # tag carries no key, so a new key under the same tag is what gets refused.
    monkeypatch.setattr(build, "compute", lambda: VERSION)
    argv = ["--only", "serving", "--builder", "buildah", "--base", "nvidia", "--no-smoke"]
    argv += ["--bundle", str(bundle), "--model-version", "3", "--record", str(tmp_path / "record.json")]
    for _ in range(2):
        with pytest.raises(_Built):
            build.main(argv)
        time.sleep(1.1)  # `serving build` stamps its repository to the second
    assert keys[0] == keys[1]


def test_model_inputs_follow_the_bytes_and_the_backend(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, weights in ((first, b"weights"), (second, b"other weights")):
        folder.mkdir()
        (folder / "model.onnx").write_bytes(weights)
        (folder / "metadata.json").write_text("{}")
    key = model_inputs(bundle=first, model_repository=None, backend="python")
    assert key == model_inputs(bundle=first, model_repository=None, backend="python")
    assert key != model_inputs(bundle=second, model_repository=None, backend="python")
    assert key != model_inputs(bundle=first, model_repository=None, backend="onnxruntime")
    assert key != model_inputs(bundle=None, model_repository=first, backend="python")
    assert model_inputs(bundle=None, model_repository=None, backend="python") == "tiny:python"


def _ready_repository(folder: Path) -> Path:
    """A ready-made repository as `serving build` leaves it: manifest, one version folder, and its lock file."""
    (folder / "classifier/3").mkdir(parents=True)
    (folder / "classifier/3/model.onnx").write_bytes(b"weights")
    (folder / "repository.json").write_text(
        '{"format_version": 2, "pinned": null, "versions": {"3": {"dataset_manifest_sha256": "d"}}}\n'
    )
    (folder / ".repository.lock").write_text("4242")
    return folder


def test_a_ready_repository_keys_and_copies_without_its_lock_and_temporary_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--model-repository` is copied without `.*.tmp` files and the lock; they must not change the key either
    (a killed `serving build` or pin leaves them, the lock holds the last writer's pid)."""
    from containers import model_repository

    repo = _ready_repository(tmp_path / "repo")
    key = model_inputs(bundle=None, model_repository=repo, backend="python")
    (repo / ".repository.lock").write_text("9999")
    (repo / ".repository.json.k3j2.tmp").write_text("{")
    (repo / "classifier/.4.tmp").mkdir()
    (repo / "classifier/.4.tmp/model.onnx").write_bytes(b"half written")
    assert model_inputs(bundle=None, model_repository=repo, backend="python") == key
    (repo / "classifier/3/model.onnx").write_bytes(b"other weights")
    assert model_inputs(bundle=None, model_repository=repo, backend="python") != key

    monkeypatch.setattr(model_repository, "REPO_ROOT", tmp_path / "checkout")  # not the real build context
    labels = model_repository.prepare_model_repository(
        bundle=None, model_repository=repo, model_version=None, backend="python"
    )
    target = tmp_path / "checkout" / model_repository.MODEL_REPOSITORY_CONTEXT
    copied = sorted(str(p.relative_to(target)) for p in target.rglob("*"))
    assert labels["model_version"] == "3"
    assert copied == ["classifier", "classifier/3", "classifier/3/model.onnx", "repository.json"], copied
