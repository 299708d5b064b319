"""`containers.build --push` asks the registry before it builds anything: a registry that is down, one that
refuses this machine, and a tag that already names an image built from other inputs each end the build at once,
with exit 1 and a message naming the registry, instead of after minutes of building (or, for a refused read,
after the push, with no record written).

Real registries (distribution 2.8 on free 127.0.0.1 ports, one with htpasswd auth), the real entry point; the
build itself is replaced by a guard that fails the test if it is reached.
"""

from __future__ import annotations

import base64
import crypt  # bcrypt hashes for the registry's htpasswd file (Python 3.11: deprecated, still present)
import json
import os
import shutil
import uuid
import warnings
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from containers import build, buildah, model_repository, publish, services
from containers.version import Version
from localservers import free_port
from tests.containers.tiny_images import build_tiny
from tests.httpd import http_server

pytestmark = pytest.mark.integration

VERSION = Version("0.1.0", "abc1234")


@pytest.fixture(autouse=True)
def _needs_tools() -> None:
    if os.geteuid() != 0 or shutil.which("buildah") is None or shutil.which("docker-registry") is None:
        pytest.skip("needs root, buildah and docker-registry (apt-get install -y buildah docker-registry)")


@pytest.fixture
def never_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first step of each image (its base; then the build) must not be reached."""

    def reached(*_: Any, **__: Any) -> Any:
        raise AssertionError("the build started before the registry was asked")

    monkeypatch.setattr(build, "_base", reached)
    monkeypatch.setattr(build, "build_image", reached)
    # The tree changes under other jobs: a fixed version.
    monkeypatch.setattr(build, "compute", lambda: VERSION)


def _build(registry: str, record: Path, *extra: str) -> int:
    return build.main(
        [
            "--push",
            "--registry",
            registry,
            "--builder",
            "buildah",
            "--no-smoke",
            "--record",
            str(record),
            *extra,
        ]
    )


def test_a_registry_that_is_down_stops_the_build_before_it_starts(
    never_build: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = f"127.0.0.1:{free_port()}"  # nothing listens there
    assert _build(registry, tmp_path / "record.json", "--base", "local") == 1
    err = capsys.readouterr().err
    assert registry in err and "Connection refused" in err and "Nothing was built" in err, err
    assert not (tmp_path / "record.json").exists()


@pytest.fixture(scope="module")
def locked_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("locked-registry")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        hashed = crypt.crypt("right-password", crypt.mksalt(crypt.METHOD_BLOWFISH))
    (workdir / "htpasswd").write_text(f"ci:{hashed}\n")
    with services.oci_registry(workdir, htpasswd=workdir / "htpasswd") as address:
        yield address


@pytest.mark.parametrize("password", [None, "wrong-password"])
def test_a_registry_that_refuses_this_machine_stops_the_build_before_it_starts(
    never_build: None,
    locked_registry: str,
    password: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    auths = {}
    if password:
        auths[locked_registry] = {"auth": base64.b64encode(f"ci:{password}".encode()).decode()}
    (tmp_path / "config.json").write_text(json.dumps({"auths": auths}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    assert _build(locked_registry, tmp_path / "record.json", "--base", "local") == 1
    err = capsys.readouterr().err
    assert locked_registry in err and "HTTP 401" in err and "Nothing was built" in err, err
    assert ("refused" if password else "none apply") in err, err
    assert "buildah's own auth.json is not read" in err, err  # where this check reads credentials from
    assert not (tmp_path / "record.json").exists()


@pytest.fixture(scope="module")
def open_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with services.oci_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


@pytest.fixture
def tiny_image(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """One small layer under the tag the build will want, labelled with a build key no build has."""
    entry, image_id = build_tiny(tmp_path, "training", VERSION.tag, "f" * 64, "built from other inputs")
    yield entry
    buildah.run(["rmi", "--force", image_id], check=False)


def test_a_tag_that_names_other_inputs_stops_the_build_before_it_starts(
    never_build: None,
    open_registry: str,
    tiny_image: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    registry = f"{open_registry}/pre-{uuid.uuid4().hex[:8]}"
    publish.push(tiny_image, f"{registry}/training", VERSION, builder="buildah", client=None)
    # NVIDIA's base by its pinned digest (never pulled here): the tag carries no `-local.<key>`, so the same
    # commit built from other inputs (another lock, another base) wants the same tag.
    monkeypatch.setattr(build, "_base", lambda image, *_: (None, build.pinned_base(image).partition("@")[2]))
    assert _build(registry, tmp_path / "record.json", "--base", "nvidia", "--only", "training") == 1
    err = capsys.readouterr().err
    assert f"{registry}/training:{VERSION.tag} already names {tiny_image['digest']}" in err, err
    assert "built from other inputs" in err and "Nothing was built" in err, err
    assert not (tmp_path / "record.json").exists()


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A plain HTTP file server (a wrong address): it answers 404 to every registry path."""
    handler = partial(SimpleHTTPRequestHandler, directory=str(tmp_path_factory.mktemp("www")))
    with http_server(handler) as served:
        yield served.address


def test_an_address_that_is_not_a_registry_stops_the_build_before_it_starts(
    never_build: None, web_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _build(web_server, tmp_path / "record.json", "--base", "local") == 1
    err = capsys.readouterr().err
    assert f"http://{web_server}/v2/ answered HTTP 404" in err and "not a container registry" in err, err
    assert "Nothing was built" in err, err
    assert not (tmp_path / "record.json").exists()


def test_a_repository_the_registry_will_not_create_stops_the_build_before_it_starts(
    never_build: None,
    open_registry: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The registry's host names ECR (as a custom domain would): repositories must exist before the push.
    monkeypatch.setenv("PIPELINE_REGISTRY_AUTH", "ecr")
    registry = f"{open_registry}/missing-{uuid.uuid4().hex[:8]}"
    assert _build(registry, tmp_path / "record.json", "--base", "local") == 1
    err = capsys.readouterr().err
    assert f"the repository {registry}/training does not exist (the registry answered NAME_UNKNOWN" in err, (
        err
    )
    assert "ECR does not create repositories on push" in err and "Nothing was built" in err, err
    assert not (tmp_path / "record.json").exists()


def test_a_missing_tag_or_a_repository_the_push_creates_passes_the_check(
    open_registry: str, tiny_image: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    repository = f"{open_registry}/fresh-{uuid.uuid4().hex[:8]}/training"
    publish.check_registry(repository, VERSION.tag)  # distribution creates the repository on the first push
    publish.push(tiny_image, repository, VERSION, builder="buildah", client=None)
    monkeypatch.setenv("PIPELINE_REGISTRY_AUTH", "ecr")
    publish.check_registry(repository, "0.2.0-def5678")  # MANIFEST_UNKNOWN: only the tag is missing


def test_a_refused_serving_tag_stops_the_build_before_the_training_image_is_built(
    never_build: None,
    open_registry: str,
    tiny_image: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every image's key and tag are checked before any build: the serving tag naming other inputs used to be
    found after the training image was built and pushed, and the run said "Nothing was built"."""
    registry = f"{open_registry}/both-{uuid.uuid4().hex[:8]}"
    serving_tag = VERSION.for_model("3").tag
    foreign = {**tiny_image, "tags": list(tiny_image["tags"]), "version": serving_tag}
    publish.push(foreign, f"{registry}/serving", VERSION, builder="buildah", client=None)
    monkeypatch.setattr(build, "_base", lambda image, *_: (None, build.pinned_base(image).partition("@")[2]))
    monkeypatch.setattr(model_repository, "REPO_ROOT", tmp_path / "checkout")  # not the real build context
    ready = tmp_path / "models"
    (ready / "classifier/3").mkdir(parents=True)
    (ready / "classifier/3/model.onnx").write_bytes(b"weights")
    (ready / "repository.json").write_text('{"format_version": 2, "versions": {"3": {}}}\n')
    code = _build(registry, tmp_path / "record.json", "--base", "nvidia", "--model-repository", str(ready))
    assert code == 1
    err = capsys.readouterr().err
    assert f"{registry}/serving:{serving_tag} already names {foreign['digest']}" in err, err
    assert "Nothing was built" in err, err
    assert not (tmp_path / "record.json").exists()
