"""The Docker path and the push path, against a real Docker engine and a real OCI registry.

One private `dockerd` (vfs, no network) and one `docker-registry` (distribution 2.8 on a free
127.0.0.1 port) are started for the module and stopped by their own pids. The serving image is
built on the local stand-in base (made by buildah, loaded into the engine: nothing is pulled
from a public registry), smoke-run by the engine, pushed, and pulled back by digest. buildah's
push and pull are tested in `test_images_build_and_smoke.py` on the images it builds anyway; the
training image's Docker build is left out (another 2 GB build would cost minutes more).
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from containers import build, docker_engine, localbase, registry, services
from containers.errors import ContainerError
from containers.version import Version

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _unmet() -> str | None:
    reason = services.unmet_docker()
    if reason:
        return reason
    for tool in ("buildah", "debootstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (the local base images are made with it)"
    return None


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    reason = _unmet()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("engines")
    data = Path("/var/tmp") / f"dockerd-test-{uuid.uuid4().hex[:8]}"  # vfs: GBs, off tmpfs
    with (
        services.docker_daemon(data) as host,
        services.oci_registry(work / "registry") as reg,
        pytest.MonkeyPatch.context() as mp,
    ):
        mp.setenv("DOCKER_HOST", host)
        client = docker_engine.connect()
        assert client is not None, f"the engine at {host} does not answer"
        yield {"client": client, "registry": reg, "work": work}
        client.close()
    shutil.rmtree(data, ignore_errors=True)


def _build(engines: dict[str, Any], builder: str, name: str, *extra: str) -> dict[str, Any]:
    record = engines["work"] / f"{name}.json"
    repository = f"localhost/eu-ml-platform-test-{uuid.uuid4().hex[:8]}"
    argv = ["--builder", builder, "--base", "local", "--only", "serving", "--repository", repository]
    argv += ["--record", str(record), *extra]
    assert build.main(argv) == 0
    entry = json.loads(record.read_text())["images"]["serving"]
    entry["_record"], entry["_repository"], entry["_argv"] = record, repository, argv
    return entry


@pytest.fixture(scope="module")
def docker_pushed(engines: dict[str, Any]) -> dict[str, Any]:
    return _build(engines, "docker", "docker", "--push", "--registry", engines["registry"])


def test_docker_builds_smokes_and_pushes_the_serving_image(
    engines: dict[str, Any], docker_pushed: dict[str, Any]
) -> None:
    entry, reg = docker_pushed, engines["registry"]
    assert entry["builder"] == "docker" and entry["pushed"] and entry["pull_verified"]
    # The engine ran the image's own CMD, its HEALTHCHECK turned healthy, one inference answered.
    assert entry["smoke"]["healthy"] and entry["smoke"]["label"] in ("negative", "positive")
    assert {"sentiment", "classifier"} <= set(entry["smoke"]["models"])
    # The record names the pushed reference, with the repository as given, and the registry's digest.
    assert entry["reference"] == f"{reg}/serving@{entry['digest']}" and DIGEST.fullmatch(entry["digest"])
    assert f"{reg}/serving:{entry['version']}" in entry["tags"]
    assert entry["local_digest"] == entry["image_id"] != entry["digest"]  # unpushed: only a local id
    # What the registry itself serves for the tag and for the digest (Registry HTTP API v2).
    assert registry.manifest_digest(f"{reg}/serving:{entry['version']}") == entry["digest"]
    assert registry.manifest_digest(entry["reference"]) == entry["digest"]


def test_a_pull_by_the_recorded_reference_returns_that_digest(
    engines: dict[str, Any], docker_pushed: dict[str, Any]
) -> None:
    client = engines["client"]
    # Remove every name of the image, so its layers go and the pull has to fetch them.
    local = docker_pushed["tags"][0]
    for name in docker_pushed["tags"]:
        client.images.remove(name, force=True)
    assert not docker_engine.image_exists(client, docker_pushed["image_id"])
    assert docker_engine.pull_digest(client, docker_pushed["reference"]) == docker_pushed["digest"]
    pulled = client.images.get(docker_pushed["reference"])
    assert pulled.id == docker_pushed["image_id"]  # the same image config, byte for byte
    repository, _, tag = local.rpartition(":")
    pulled.tag(repository, tag=tag)  # the local name back, for the tests below


def test_local_base_build_is_tagged_apart_and_names_its_base(docker_pushed: dict[str, Any]) -> None:
    entry = docker_pushed
    base = localbase.image_ref("serving")
    assert entry["base_image"] == base and DIGEST.fullmatch(entry["base_digest"])
    version = Version.parse(entry["version"])
    assert version.local == entry["build_key"][:8]  # never the production tag of this commit
    assert entry["version"].endswith("-m0")
    labels = docker_engine.image_facts(docker_engine.connect(), entry["tags"][0])["labels"]
    assert labels[build.BUILD_KEY_LABEL] == entry["build_key"]
    assert labels["org.opencontainers.image.base.name"] == base


def test_sbom_lists_the_image_python_packages(docker_pushed: dict[str, Any]) -> None:
    sbom = json.loads((docker_pushed["_record"].parent / "sbom/serving.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX" and sbom["specVersion"] == "1.6"
    found = {c["name"].lower(): c["version"] for c in sbom["components"]}
    # Ours (from containers/serving/requirements.txt) and the base's own numpy, as installed.
    assert found["onnxruntime"] and found["tokenizers"] and found["numpy"]
    assert docker_pushed["sbom"].endswith("sbom/serving.cdx.json")


def test_existing_tag_is_reused_only_with_the_same_build_key(
    engines: dict[str, Any], docker_pushed: dict[str, Any]
) -> None:
    client = engines["client"]
    version = Version.parse(docker_pushed["version"])
    spec = build.ImageSpec(
        image="serving",
        version=version,
        repository=docker_pushed["_repository"],
        build_key=docker_pushed["build_key"],
        base_image=docker_pushed["base_image"],
    )
    again = build.build_image(spec, builder="docker", client=client)
    assert again["reused_existing_tag"] and again["image_id"] == docker_pushed["image_id"]
    other = build.ImageSpec(
        image="serving",
        version=version,
        repository=docker_pushed["_repository"],
        build_key="0" * 64,  # e.g. another base digest under the same tag
        base_image=docker_pushed["base_image"],
    )
    with pytest.raises(ContainerError, match="other inputs"):
        build.build_image(other, builder="docker", client=client)


def test_engine_and_registry_are_stopped_by_their_pids(tmp_path: Path) -> None:
    import psutil

    with services.oci_registry(tmp_path / "reg") as reg:
        port = int(reg.rpartition(":")[2])
        owners = [c.pid for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == port]
        assert owners and all(psutil.Process(p).name() == "docker-registry" for p in owners if p)
    assert not [p for p in owners if p and psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
