"""`make images` with a Docker engine, and the push path, against a real engine and a real OCI registry.

One private `dockerd` (overlay2 where an overlay mounts, else vfs; no network) and one
`docker-registry` (distribution 2.8 on a free 127.0.0.1 port) are started for the module and
stopped by their own pids. `make images` (the Makefile's recipe, `setup` taken as done) then runs
with DOCKER_HOST pointing at the engine and `--push --registry 127.0.0.1:PORT`: it must choose
Docker, build BOTH images on the local stand-in bases (made by buildah and loaded into the engine:
nothing is pulled from a public registry), smoke-run them with the engine, push them and confirm
each digest by a pull. The tests below read what that one run left: the record, the SBOMs, the
engine and the registry. buildah's own push and pull are tested in `test_images_build_and_smoke.py`.
On a machine where no overlay mounts (vfs), only serving is built and the training tests skip.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from containers import build, buildah, docker_engine, localbase, registry, services
from containers.errors import ContainerError
from containers.version import REPO_ROOT, Version

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]
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
    data = Path("/var/tmp") / f"dockerd-test-{uuid.uuid4().hex[:8]}"  # GBs (both images): off tmpfs
    driver = services.storage_driver()
    with (
        services.docker_daemon(data, driver=driver) as host,
        services.oci_registry(work / "registry") as reg,
        pytest.MonkeyPatch.context() as mp,
    ):
        mp.setenv("DOCKER_HOST", host)
        client = docker_engine.connect()
        assert client is not None, f"the engine at {host} does not answer"
        yield {"client": client, "registry": reg, "work": work, "driver": driver}
        client.close()
    shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="module")
def made(engines: dict[str, Any]) -> dict[str, Any]:
    """`make images IMAGES_ARGS="--push --registry 127.0.0.1:PORT ..."` with the engine answering.

    `-o setup`: the virtualenvs are the ones running this test (`make test` made them); a test
    must not reinstall them. DOCKER_HOST (set by `engines`) is the engine it finds; builder, bases
    and smoke tests are left to `make images` to choose."""
    work = engines["work"]
    record = work / "make-images.json"
    repository = f"localhost/eu-ml-platform-test-{uuid.uuid4().hex[:8]}"
    args = f"--push --registry {engines['registry']} --repository {repository} --record {record}"
    if engines["driver"] == "vfs":
        # vfs copies the whole root filesystem for each of the classic builder's ~20 steps: the
        # 2.6 GB training image would cost most of the suite's budget. Where no overlay mounts,
        # `make images` builds serving only and the training tests below say why they skip.
        args += " --only serving"
    start = time.monotonic()
    proc = subprocess.run(
        ["make", "--no-print-directory", "-o", "setup", "images", f"IMAGES_ARGS={args}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=2100, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    images = json.loads(record.read_text())["images"]
    for entry in images.values():
        entry["_record"], entry["_repository"] = record, repository
    images["_seconds"] = time.monotonic() - start
    images["_output"] = proc.stdout + proc.stderr
    return images


@pytest.fixture(scope="module")
def docker_pushed(made: dict[str, Any]) -> dict[str, Any]:
    return made["serving"]


@pytest.fixture(scope="module")
def training(made: dict[str, Any]) -> dict[str, Any]:
    if "training" not in made:
        pytest.skip(
            "dockerd runs on vfs here (no overlay mount): the training image's Docker build is left out"
        )
    return dict(made["training"])


def test_make_images_builds_smokes_and_pushes_both_images_with_docker(
    engines: dict[str, Any], made: dict[str, Any], training: dict[str, Any]
) -> None:
    reg = engines["registry"]
    assert "local stand-ins" in made["_output"]  # no NVIDIA base at hand: said, not hidden
    for name in ("training", "serving"):
        entry = made[name]
        # An engine answered, so `make images` built with it, and pushed what it built.
        assert entry["builder"] == "docker" and entry["pushed"] and entry["pull_verified"], name
        assert entry["reference"] == f"{reg}/{name}@{entry['digest']}" and DIGEST.fullmatch(entry["digest"])
        assert entry["tags"] == [
            f"{entry['_repository']}/{name}:{entry['version']}",
            f"{reg}/{name}:{entry['version']}",
        ]
        assert registry.manifest_digest(entry["reference"]) == entry["digest"]
        assert registry.manifest_digest(f"{reg}/{name}:{entry['version']}") == entry["digest"]
        assert (entry["_record"].parent / "sbom" / f"{name}.cdx.json").is_file()
    # The engine ran them: the training image trained (as its own user), Triton answered.
    smoke = training["smoke"]
    assert smoke["uid"] == 10001 and smoke["steps"] > 0 and 0.0 <= smoke["test_accuracy"] <= 1.0
    assert made["serving"]["smoke"]["healthy"] and made["serving"]["smoke"]["label"] in (
        "negative",
        "positive",
    )


def test_training_image_names_the_local_base_it_was_built_on(
    engines: dict[str, Any], training: dict[str, Any]
) -> None:
    entry, client = training, engines["client"]
    base = localbase.image_ref("training")
    assert entry["base_image"] == base and entry["base_digest"] == buildah.image_digest(base)
    assert entry["local_base"] and Version.parse(entry["version"]).local == entry["build_key"][:8]
    labels = docker_engine.image_facts(client, entry["tags"][0])["labels"]
    assert labels["org.opencontainers.image.base.name"] == base
    assert labels[build.BUILD_KEY_LABEL] == entry["build_key"]
    # The engine built on exactly the bytes buildah holds (image id = digest of the image config).
    assert client.images.get(base).id == f"sha256:{buildah.image_id(base).removeprefix('sha256:')}"
    # torch as found inside the image: the CPU stand-in's, so no CUDA.
    assert entry["torch"].startswith("2.13.") and entry["cuda"] is None
    sbom = json.loads((entry["_record"].parent / "sbom/training.cdx.json").read_text())
    found = {c["name"].lower() for c in sbom["components"]}
    assert {"torch", "transformers", "onnx"} <= found


def _get(url: str, *, method: str = "GET", accept: str = "") -> tuple[bytes, dict[str, str]]:
    request = urllib.request.Request(url, method=method, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback registry)
        return response.read(), dict(response.headers)


def test_the_registry_holds_every_blob_of_both_pushed_images(
    engines: dict[str, Any], made: dict[str, Any]
) -> None:
    """What a cluster would pull, asked of the registry itself (Registry HTTP API v2): the manifest
    under the recorded digest hashes to that digest, and its config and every layer are there."""
    reg = engines["registry"]
    accept = (
        "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
    )
    for name in [n for n in ("training", "serving") if n in made]:
        digest = made[name]["digest"]
        body, _ = _get(f"http://{reg}/v2/{name}/manifests/{digest}", accept=accept)
        assert f"sha256:{hashlib.sha256(body).hexdigest()}" == digest, name
        manifest = json.loads(body)
        blobs = [manifest["config"], *manifest["layers"]]
        assert len(manifest["layers"]) > 1
        for blob in blobs:
            _, headers = _get(f"http://{reg}/v2/{name}/blobs/{blob['digest']}", method="HEAD")
            assert int(headers["Content-Length"]) == blob["size"], (name, blob["digest"])


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


def test_a_stale_base_tag_in_the_engine_is_replaced_not_built_on(
    engines: dict[str, Any], training: dict[str, Any], docker_pushed: dict[str, Any]
) -> None:
    """The serving base's name made to point at other bytes in the engine (as after a base rebuilt
    under the same cache key): loading it again must bring buildah's image back under that name."""
    client, base = engines["client"], docker_pushed["base_image"]
    want = f"sha256:{buildah.image_id(base).removeprefix('sha256:')}"
    repository, _, tag = base.rpartition(":")
    client.images.get(training["base_image"]).tag(repository, tag=tag)
    assert client.images.get(base).id != want
    assert docker_engine.load_from_buildah(client, base) == want
    assert client.images.get(base).id == want


def test_engine_and_registry_are_stopped_by_their_pids(tmp_path: Path) -> None:
    import psutil

    with services.oci_registry(tmp_path / "reg") as reg:
        port = int(reg.rpartition(":")[2])
        owners = [c.pid for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == port]
        assert owners and all(psutil.Process(p).name() == "docker-registry" for p in owners if p)
    assert not [p for p in owners if p and psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
