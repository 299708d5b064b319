"""Build tooling that needs no image: build arguments, the record, the push target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from containers import build
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
    repos = build.registry_repositories(None, "registry.example.eu/ml/")
    assert repos == {
        "training": "registry.example.eu/ml/training",
        "serving": "registry.example.eu/ml/serving",
    }


def test_registry_needs_a_source() -> None:
    with pytest.raises(ContainerError, match="--registry"):
        build.registry_repositories(None, None)


def test_registry_from_plan_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")  # no pulumi CLI: the offline plan is the source
    (tmp_path / "reports/plan").mkdir(parents=True)
    known = {
        "training": "1.dkr.ecr.eu-south-2.amazonaws.com/p/training",
        "serving": "1.dkr.ecr.eu-south-2.amazonaws.com/p/serving",
    }
    (tmp_path / "reports/plan/dev.json").write_text(json.dumps({"outputs": {"image_repositories": known}}))
    assert build.registry_repositories("dev", None) == known
    unknown = {k: "[unknown]" for k in known}
    (tmp_path / "reports/plan/dev.json").write_text(json.dumps({"outputs": {"image_repositories": unknown}}))
    with pytest.raises(ContainerError, match="pulumi up"):
        build.registry_repositories("dev", None)


def test_dirty_versions_are_never_pushed() -> None:
    entry = {"version": "0.1.0-abc1234-dirty.12345678", "tags": ["x"]}
    with pytest.raises(ContainerError, match="uncommitted"):
        build.push(
            entry,
            "registry.example.eu/ml/training",
            Version("0.1.0", "abc1234", "12345678"),
            builder="buildah",
            client=None,
        )
    assert entry["tags"] == ["x"]
