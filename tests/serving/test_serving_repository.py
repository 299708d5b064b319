"""Building the versioned model repository from a real export bundle (no server needed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from serving.bundle import load_bundle
from serving.errors import BundleError, ConfigError
from serving.manifest import read_manifest, versions
from serving.repository import MODELS, BuildOptions, build, pin, recover


def config(repo: Path, model: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse((repo / model / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())


def test_build_writes_every_model_with_the_bundle_files(tiny_bundle: Path, tmp_path: Path) -> None:
    repo = tmp_path / "models"
    assert build(tiny_bundle, repo) == 1
    assert (repo / "sentiment/1/tokenizer/tokenizer.json").read_bytes() == (
        tiny_bundle / "tokenizer/tokenizer.json"
    ).read_bytes()
    assert json.loads((repo / "sentiment/1/metadata.json").read_text())["max_length"] == 32
    assert (repo / "classifier/1/model.onnx").read_bytes() == (tiny_bundle / "model.onnx").read_bytes()
    assert (repo / "classifier/1/model.py").is_file()  # both engines' files: the switch is config only
    assert json.loads((repo / "sentiment/1/labels.json").read_text()) == ["negative", "positive"]
    assert (repo / "sentiment/1/monitoring/records.py").is_file()  # what model.py imports for records
    for model in MODELS:
        assert config(repo, model).name == model
        assert not list((repo / model).glob(".*"))  # no staging leftovers
    manifest = read_manifest(repo)
    assert manifest["versions"]["1"]["model_name"] == "tiny-random-bert-seed0"
    assert manifest["versions"]["1"]["precision"] == "fp32"


def test_versions_increase_and_the_previous_one_stays_loadable(tiny_bundle: Path, tmp_path: Path) -> None:
    repo = tmp_path / "models"
    build(tiny_bundle, repo)
    assert build(tiny_bundle, repo, options=BuildOptions(precision="int8")) == 2
    assert build(tiny_bundle, repo, version=7) == 7
    assert versions(repo) == [1, 2, 7]
    with pytest.raises(ConfigError, match="only increase.*--version 8"):
        build(tiny_bundle, repo, version=7)
    assert (repo / "classifier/2/model.onnx").read_bytes() == (tiny_bundle / "model.int8.onnx").read_bytes()
    assert config(repo, "classifier").version_policy.latest.num_versions == 2
    # Each endpoint version calls the classifier of its own build: a whole rollback by construction.
    for v in (1, 2, 7):
        steps = json.loads((repo / f"sentiment/{v}/steps.json").read_text())
        assert steps == {"classifier": {"model": "classifier", "version": v}}


def test_pin_is_a_rollback_and_a_new_build_releases_it(tiny_bundle: Path, tmp_path: Path) -> None:
    repo = tmp_path / "models"
    build(tiny_bundle, repo)
    build(tiny_bundle, repo)
    pin(repo, 1)
    for model in MODELS:
        assert list(config(repo, model).version_policy.specific.versions) == [1]
    with pytest.raises(ConfigError, match="available \\[1, 2\\]"):
        pin(repo, 5)
    pin(repo, None)
    assert config(repo, "sentiment").version_policy.latest.num_versions == 2
    pin(repo, 2)
    build(tiny_bundle, repo)
    assert read_manifest(repo)["pinned"] is None
    assert config(repo, "classifier").version_policy.latest.num_versions == 2


def test_switching_backend_switches_the_engine_and_the_topology(tiny_bundle: Path, tmp_path: Path) -> None:
    repo = tmp_path / "models"
    build(tiny_bundle, repo, options=BuildOptions(backend="onnxruntime"))
    assert config(repo, "classifier").platform == "onnxruntime_onnx"
    assert not (repo / "sentiment/1/model.onnx").exists()  # bls: the endpoint calls the classifier
    build(tiny_bundle, repo, options=BuildOptions(backend="python"))
    assert config(repo, "classifier").backend == "python"
    # Now fused (the python default) for every loaded version: version 1 gets its own build's graph.
    assert config(repo, "sentiment").parameters["topology"].string_value == "fused"
    for v in ("1", "2"):
        graph = (repo / "classifier" / v / "model.onnx").read_bytes()
        assert (repo / "sentiment" / v / "model.onnx").read_bytes() == graph


def test_incomplete_or_foreign_bundles_are_refused(tiny_bundle: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_bundle, broken)
    (broken / "labels.json").unlink()
    with pytest.raises(BundleError, match="missing \\['labels.json'\\]"):
        load_bundle(broken)
    shutil.copy2(tiny_bundle / "labels.json", broken / "labels.json")
    meta = json.loads((broken / "metadata.json").read_text())
    (broken / "metadata.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(BundleError, match="format_version 99"):
        build(broken, tmp_path / "models")
    no_int8 = tmp_path / "no-int8"
    shutil.copytree(tiny_bundle, no_int8)
    (no_int8 / "model.int8.onnx").unlink()
    with pytest.raises(BundleError, match="no int8 model"):
        build(no_int8, tmp_path / "models2", options=BuildOptions(precision="int8"))
    assert not (tmp_path / "models2").exists() or not versions(tmp_path / "models2")


def test_a_graph_that_does_not_load_or_match_the_labels_is_refused(tiny_bundle: Path, tmp_path: Path) -> None:
    # Built as before, a corrupt graph kept the whole repository (older versions too) from loading, and a
    # 2-logit graph with 3 labels served class 1 as "neutral" without any error.
    corrupt = tmp_path / "corrupt"
    shutil.copytree(tiny_bundle, corrupt)
    (corrupt / "model.onnx").write_bytes(b"not a protobuf")
    with pytest.raises(BundleError, match="model.onnx does not load in ONNX Runtime .*re-run the export"):
        build(corrupt, tmp_path / "models")
    relabelled = tmp_path / "relabelled"
    shutil.copytree(tiny_bundle, relabelled)
    (relabelled / "labels.json").write_text(json.dumps(["negative", "neutral", "positive"]))
    meta = json.loads((relabelled / "metadata.json").read_text())
    meta["outputs"][0]["shape"] = [-1, -1]  # dynamic in the metadata: only the graph knows the width
    (relabelled / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(BundleError, match="logits have shape \\[1, 2\\] .* labels.json names 3 classes"):
        build(relabelled, tmp_path / "models", options=BuildOptions(precision="int8"))
    assert versions(tmp_path / "models") == []


def test_a_version_folder_left_by_an_interrupted_build_is_named_not_built_around(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "models"
    build(tiny_bundle, repo)
    stray = repo / "sentiment" / "2"
    (stray / "tokenizer").mkdir(parents=True)  # as a build killed after its first rename leaves it
    with pytest.raises(ConfigError, match="sentiment/2 already exists but .*repository.json does not list"):
        build(tiny_bundle, repo)
    # Nothing half-built beside it: Triton would load a lone classifier/2 (or fail on it).
    assert sorted(p.name for p in (repo / "classifier").iterdir() if p.is_dir()) == ["1"]
    assert (stray / "tokenizer").is_dir() and versions(repo) == [1]


def test_an_unreadable_manifest_is_reported_and_kept(tiny_bundle: Path, tmp_path: Path) -> None:
    repo = tmp_path / "models"
    build(tiny_bundle, repo)
    manifest = repo / "repository.json"
    manifest.write_text(manifest.read_text()[:-20])  # cut short, e.g. a full disk
    damaged = manifest.read_bytes()
    # recover: what `serve` and `check --repo` run first (they cannot tell which version folders it lists).
    for action in (lambda: build(tiny_bundle, repo), lambda: pin(repo, 1), lambda: recover(repo)):
        with pytest.raises(ConfigError, match="repository.json is not valid JSON .*restore it"):
            action()
    assert manifest.read_bytes() == damaged
