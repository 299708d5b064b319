"""Build tooling that needs no image: build arguments, the record, the push target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from containers import build, publish, sbom
from containers.errors import ContainerError
from containers.version import Version


def _spec(**kw) -> build.ImageSpec:
    return build.ImageSpec(image="serving", version=Version("0.1.0", "abc1234", model_version="3"), **kw)


def test_buildah_command_is_reproducible_and_keeps_healthcheck(tmp_path: Path) -> None:
    spec = _spec(base_image="localhost/base:1")
    args = build.build_args(spec, {"REVISION": "r", "CREATED": "c", "SOURCE": "s", "SOURCE_DATE_EPOCH": "5"})
    cmd = build.buildah_command(spec, args, "5", tmp_path / "iid")
    assert cmd[:3] == ["bud", "--isolation", "chroot"]
    assert cmd[cmd.index("--format") + 1] == "docker"  # the OCI format drops HEALTHCHECK
    assert cmd[cmd.index("--timestamp") + 1] == "5"
    assert cmd[cmd.index("--tag") + 1] == "localhost/eu-ml-platform/serving:0.1.0-abc1234-m3"
    assert "BASE_IMAGE=localhost/base:1" in cmd and "VERSION=0.1.0-abc1234-m3" in cmd
    assert cmd[-1] == str(build.REPO_ROOT)


def test_unknown_image_is_refused() -> None:
    with pytest.raises(ContainerError, match="unknown image"):
        build.ImageSpec(image="notebook", version=Version("0.1.0", "abc1234"))


def test_record_merges(tmp_path: Path) -> None:
    path = tmp_path / "images/build-record.json"
    build.write_record({"training": {"version": "1"}}, path)
    build.write_record({"serving": {"version": "2"}}, path)
    build.write_record({"training": {"version": "3"}}, path)
    assert json.loads(path.read_text()) == {
        "images": {"training": {"version": "3"}, "serving": {"version": "2"}}
    }


def test_registry_from_flag() -> None:
    repos = publish.registry_repositories(None, "registry.example.eu/ml/")
    assert repos == {
        "training": "registry.example.eu/ml/training",
        "serving": "registry.example.eu/ml/serving",
    }


def test_registry_needs_a_source() -> None:
    with pytest.raises(ContainerError, match="--registry"):
        publish.registry_repositories(None, None)


def test_registry_from_plan_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publish, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")  # no pulumi CLI: the offline plan is the source
    (tmp_path / "reports/plan").mkdir(parents=True)
    known = {
        "training": "1.dkr.ecr.eu-south-2.amazonaws.com/p/training",
        "serving": "1.dkr.ecr.eu-south-2.amazonaws.com/p/serving",
    }
    (tmp_path / "reports/plan/dev.json").write_text(json.dumps({"outputs": {"image_repositories": known}}))
    assert publish.registry_repositories("dev", None) == known
    unknown = {k: "[unknown]" for k in known}
    (tmp_path / "reports/plan/dev.json").write_text(json.dumps({"outputs": {"image_repositories": unknown}}))
    with pytest.raises(ContainerError, match="pulumi up"):
        publish.registry_repositories("dev", None)


def test_dirty_versions_are_never_pushed() -> None:
    entry = {"version": "0.1.0-abc1234-dirty.12345678", "tags": ["x"]}
    with pytest.raises(ContainerError, match="uncommitted"):
        publish.push(
            entry,
            "registry.example.eu/ml/training",
            Version("0.1.0", "abc1234", "12345678"),
            builder="buildah",
            client=None,
        )
    assert entry["tags"] == ["x"]


def test_local_base_builds_are_never_pushed_to_a_shared_registry() -> None:
    entry = {"version": "0.1.0-abc1234-local.0123abcd", "tags": ["x"], "digest": "sha256:" + "1" * 64}
    with pytest.raises(ContainerError, match="local stand-in base"):
        publish.push(
            entry,
            "registry.example.eu/ml/training",
            Version.parse(entry["version"]),
            builder="buildah",
            client=None,
        )
    assert entry["tags"] == ["x"]


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        ("https://user:ghp_secret@github.com/acme/eu-ml.git", "https://github.com/acme/eu-ml"),
        ("https://x-access-token:tok@github.com:443/acme/eu-ml", "https://github.com:443/acme/eu-ml"),
        ("git@github.com:acme/eu-ml.git", "https://github.com/acme/eu-ml"),
        ("ssh://git@gitlab.example.eu:2222/acme/eu-ml.git", "https://gitlab.example.eu/acme/eu-ml"),
        ("/srv/git/eu-ml", "https://example.invalid/eu-ml-platform"),
        ("", "https://example.invalid/eu-ml-platform"),
    ],
)
def test_source_label_never_carries_credentials(remote: str, expected: str) -> None:
    from containers.provenance import public_source_url

    assert public_source_url(remote) == expected


def test_build_key_changes_with_each_input() -> None:
    from containers.provenance import build_key

    version = Version("0.1.0", "abc1234", model_version="3")
    base = build_key("serving", version, base_digest="sha256:" + "a" * 64, model_tree="m1")
    assert base == build_key("serving", version, base_digest="sha256:" + "a" * 64, model_tree="m1")
    assert base != build_key("serving", version, base_digest="sha256:" + "b" * 64, model_tree="m1")
    assert base != build_key("serving", version, base_digest="sha256:" + "a" * 64, model_tree="m2")
    assert base != build_key(
        "serving", version.for_model("4"), base_digest="sha256:" + "a" * 64, model_tree="m1"
    )
    assert base != build_key(
        "serving",
        Version("0.1.0", "def5678", model_version="3"),
        base_digest="sha256:" + "a" * 64,
        model_tree="m1",
    )


def test_local_tag_is_not_the_production_tag() -> None:
    version = Version("0.1.0", "abc1234", model_version="3")
    local = version.on_local_base("0123abcdef")
    assert local.tag == "0.1.0-abc1234-local.0123abcd-m3" != version.tag
    assert Version.parse(local.tag) == local


@pytest.mark.parametrize(
    ("repository", "tls"),
    [
        ("127.0.0.1:5000/eu/serving", False),
        ("localhost:5000/serving", False),
        ("[::1]:5000/serving", False),
        ("123.dkr.ecr.eu-south-2.amazonaws.com/p/serving", True),
        ("127.0.0.1.nip.io:5000/serving", True),
    ],
)
def test_plain_http_only_for_loopback_registries(repository: str, tls: bool) -> None:
    from containers import registry

    assert registry.tls_verify(repository) is tls


def test_registry_scheme_is_refused() -> None:
    from containers import registry

    with pytest.raises(ContainerError, match="without a scheme"):
        registry.split_repository("http://registry.example.eu/ml/serving")


def test_torch_of_the_image_must_match_the_lock() -> None:
    sbom.check_torch({"torch": "2.13.0a0+b1f2c3d.nv26.07", "cuda": "13.0"}, "2.13.0+cpu")
    with pytest.raises(ContainerError, match="lock expects"):
        sbom.check_torch({"torch": "2.9.0+cu130", "cuda": "13.0"}, "2.13.0+cpu")
    with pytest.raises(ContainerError, match="no importable torch"):
        sbom.check_torch({"torch": None}, "2.13.0+cpu")


@pytest.mark.parametrize(
    ("registry", "why"),
    [
        ("registry.example.eu/ML", "is not a registry repository"),  # uppercase path
        ("http://registry.example.eu/ml", "without a scheme"),
        ("registry.example.eu/ml", "refusing to push"),  # a local-base build bound for a shared registry
    ],
)
def test_a_push_target_the_push_would_refuse_is_refused_before_building(
    registry: str,
    why: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def built(*_: object) -> None:
        raise AssertionError("started building before checking the push target")

    monkeypatch.setattr(build, "_base", built)  # the first step that costs minutes (the base image)
    monkeypatch.setattr(build, "_choose_builder", lambda choice: ("buildah", None))
    record = tmp_path / "record.json"
    argv = ["--push", "--registry", registry, "--base", "local", "--record", str(record)]
    assert build.main(argv) == 1
    assert why in capsys.readouterr().err
    assert not record.exists()


def test_sbom_names_its_image_and_the_base_by_digest(tmp_path: Path) -> None:
    """A reviewer holding the SBOM must be able to tell which image and which base it describes;
    the document stays valid against CycloneDX's own 1.6 JSON schema (strict)."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    base = "nvcr.io/nvidia/tritonserver:26.08-py3@sha256:" + "9" * 64
    entry = {
        "name": "localhost/eu-ml-platform/serving",
        "version": "0.1.0-abc1234-m3",
        "build_key": "k" * 64,
        "base_image": base,
        "base_digest": "sha256:" + "9" * 64,
    }
    inventory = {"packages": ["numpy==2.3.4", "tokenizers==0.22.1"]}
    path = sbom.write_sbom(inventory, tmp_path / "serving.cdx.json", epoch="1700000000", image=entry)
    text = path.read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    bom = json.loads(text)
    subject = bom["metadata"]["component"]
    assert (subject["type"], subject["name"], subject["version"]) == (
        "container",
        entry["name"],
        entry["version"],
    )
    assert {"name": "eu.ml-platform:build-key", "value": "k" * 64} in subject["properties"]
    (found,) = [c for c in bom["components"] if c["type"] == "container"]
    assert found["version"] == entry["base_digest"] and found["name"] == base.partition("@")[0]
    assert found["purl"].startswith(f"pkg:oci/tritonserver@sha256:{'9' * 64}?repository_url=nvcr.io/")
    assert {c["name"] for c in bom["components"]} >= {"numpy", "tokenizers"}
