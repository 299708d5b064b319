"""repository.json written by an earlier serving (tests/serving/fixtures/old_manifests, README there says which
commit wrote each), or by a newer one, read by today's `pin`, `build` and `serve`.

A pin re-renders both configs from the manifest's options: an option the old manifest lacks used to take today's
default (topology fused, length-sorted sub-batches) instead of what the old build ran, and an option this serving
does not know was a TypeError traceback (exit 1) from `BuildOptions(**options)`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

import serving.manifest
from serving.__main__ import main
from serving.options import BuildOptions
from serving.repository import model_configs

FORMAT_VERSION = getattr(serving.manifest, "FORMAT_VERSION", 2)  # getattr: the test also runs on old code
FIXTURES = Path(__file__).parent / "fixtures" / "old_manifests"


def old_repo(tmp_path: Path, commit: str) -> Path:
    """The fixture manifest with its version folders (empty: pin and the checks read only the manifest)."""
    repo = tmp_path / f"repo-{commit}"
    repo.mkdir()
    shutil.copy(FIXTURES / f"{commit}.json", repo / "repository.json")
    manifest = json.loads((repo / "repository.json").read_text())
    for model in ("sentiment", "classifier"):
        for version in manifest["versions"]:
            (repo / model / version).mkdir(parents=True)
    return repo


def parameters(repo: Path, model: str) -> dict[str, str]:
    config = text_format.Parse((repo / model / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    return {k: v.string_value for k, v in config.parameters.items()}


@pytest.mark.parametrize("commit", ["043b0de", "eacabb0"])
def test_pin_renders_what_the_old_build_ran(
    tmp_path: Path, commit: str, capsys: pytest.CaptureFixture
) -> None:
    repo = old_repo(tmp_path, commit)
    topology = json.loads((repo / "repository.json").read_text())["options"].get("topology", "bls")
    assert main(["pin", str(repo), "1"]) == 0, capsys.readouterr().err
    endpoint = parameters(repo, "sentiment")
    assert "length_split_overhead_tokens" not in endpoint  # the old endpoint padded each batch as one call
    assert endpoint.get("topology", "bls") == topology  # 043b0de's endpoint called the classifier (bls)
    manifest = json.loads((repo / "repository.json").read_text())
    assert manifest["pinned"] == 1 and manifest["format_version"] == FORMAT_VERSION
    assert main(["pin", str(repo), "latest"]) == 0  # read back in the format just written: same meaning
    assert parameters(repo, "sentiment") == endpoint


def test_ensemble_era_repository_is_refused_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    repo = old_repo(tmp_path, "f0825f9")
    before = (repo / "repository.json").read_bytes()
    assert main(["pin", str(repo), "1"]) == 2
    err = capsys.readouterr().err
    assert "ensemble" in err and "new repository folder" in err and "Traceback" not in err
    assert (repo / "repository.json").read_bytes() == before


def test_ensemble_era_repository_refuses_a_build(
    tmp_path: Path, tiny_bundle: Path, capsys: pytest.CaptureFixture
) -> None:
    """A build would add a python-backend version beside the ensemble's, and Triton would fail to load the
    ensemble's version folders (the whole repository with them)."""
    repo = old_repo(tmp_path, "f0825f9")
    assert main(["build", str(tiny_bundle), str(repo)]) == 2
    assert "new repository folder" in capsys.readouterr().err
    assert sorted(p.name for p in (repo / "sentiment").iterdir()) == ["1"]


def newer_repo(tmp_path: Path, change: dict) -> Path:
    repo = old_repo(tmp_path, "eacabb0")
    manifest = json.loads((repo / "repository.json").read_text())
    manifest["options"]["length_split_overhead"] = 16.0
    manifest["format_version"] = FORMAT_VERSION
    for key, value in change.items():
        target = manifest["options"] if key.startswith("options.") else manifest
        target[key.removeprefix("options.")] = value
    (repo / "repository.json").write_text(json.dumps(manifest))
    return repo


NEWER_FORMAT = {"format_version": FORMAT_VERSION + 1}
ADDED_OPTION = {"options.speculative_batches": 4}  # same format, an option a later serving added


@pytest.mark.parametrize(
    ("command", "change", "named"),
    [
        ("pin", NEWER_FORMAT, f"format {FORMAT_VERSION + 1}"),
        ("pin", ADDED_OPTION, "speculative_batches"),
        # serve renders no config (Triton loads the newer build's own), so only the format stops it
        ("serve", NEWER_FORMAT, f"format {FORMAT_VERSION + 1}"),
    ],
)
def test_a_newer_servings_repository_is_refused_naming_what_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture, command: str, change: dict, named: str
) -> None:
    repo = newer_repo(tmp_path, change)
    before = (repo / "repository.json").read_bytes()
    argv = ["pin", str(repo), "1"] if command == "pin" else ["serve", str(repo), "--http-port", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "newer serving" in err and "Traceback" not in err
    assert (repo / "repository.json").read_bytes() == before


@pytest.mark.parametrize(
    ("metadata", "named"),
    [
        ({"format_version": 2}, "bundle format_version 2 comes from a newer training export"),
        ([], "metadata.json is not a JSON object"),  # was an AttributeError traceback
    ],
)
def test_a_bundle_of_a_newer_or_unknown_format_is_refused_with_the_fix(
    tmp_path: Path, tiny_bundle: Path, capsys: pytest.CaptureFixture, metadata: object, named: str
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    meta = json.loads((bundle / "metadata.json").read_text())
    (bundle / "metadata.json").write_text(
        json.dumps({**meta, **metadata} if isinstance(metadata, dict) else metadata)
    )
    assert main(["build", str(bundle), str(tmp_path / "repo")]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err


@pytest.mark.parametrize("commit", ["043b0de", "eacabb0"])
def test_a_pin_writes_the_old_options_out_in_full(tmp_path: Path, commit: str) -> None:
    """The pin stamps the manifest format 2; its options used to stay as the old build left them, without
    `topology`/`length_split_overhead`. A serving before ABSENT_MEANS (ddc8f8b: `BuildOptions(**options)`, an
    older image during a rollout, a checkout of it) pinning it next filled them with its own defaults (fused,
    sub-batches): the old repository silently changed. Written out resolved, every reader renders what it ran."""
    repo = old_repo(tmp_path, commit)
    assert main(["pin", str(repo), "1"]) == 0
    options = json.loads((repo / "repository.json").read_text())["options"]
    built = json.loads((FIXTURES / f"{commit}.json").read_text())["options"]
    assert options["topology"] == built.get("topology", "bls") and options["length_split_overhead"] == -1.0
    plain = BuildOptions(**options)  # as ddc8f8b read it, with no ABSENT_MEANS
    assert (
        model_configs(plain, 2, 1, max_length=32)["sentiment"].render()
        == (repo / "sentiment" / "config.pbtxt").read_text()
    )
