"""Build both images for real with buildah on the local bases, then run them (`buildah run`).

The Dockerfiles are built unchanged apart from BASE_IMAGE (and the prepared context under
build/images/). Needs root, buildah, debootstrap, unshare/nsenter/ip (util-linux, iproute2): CI
installs them (.ci/run). The local bases are cached in buildah's storage: cold, this test also
debootstraps both bases (~4-7 min more on 2 cores).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from containers import build, buildah, publish, registry, services, smoke
from containers.errors import ContainerError
from containers.lint import _SECRET_NAME
from containers.version import Version

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]


def _unmet() -> str | None:
    if os.geteuid() != 0:
        return "building images with buildah --isolation chroot needs root"
    for tool in ("buildah", "debootstrap", "unshare", "nsenter", "ip", "setpriv"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install -y buildah debootstrap iproute2)"
    return None


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    reason = _unmet()
    if reason:
        pytest.skip(reason)
    # A name of its own: never reuses (or removes) an image a developer built with `make images`.
    repository = f"localhost/eu-ml-platform-test-{uuid.uuid4().hex[:8]}"
    record = tmp_path_factory.mktemp("images") / "build-record.json"
    start = time.monotonic()
    # --no-smoke: the tests below run the smoke checks themselves, one by one.
    argv = ["--builder", "buildah", "--base", "local", "--no-smoke", "--repository", repository]
    assert build.main([*argv, "--record", str(record)]) == 0
    images = json.loads(record.read_text())["images"]
    images["_seconds"] = time.monotonic() - start
    images["_repository"] = repository
    try:
        yield images
    finally:
        for name in ("training", "serving"):
            if name in images:
                subprocess.run(
                    [*buildah._base(), "rmi", "--force", images[name]["tags"][0]], capture_output=True
                )


def _labels(ref: str) -> dict[str, str]:
    return dict(buildah.image_config(ref).get("Labels") or {})


def test_record_holds_tags_and_digests(built: dict[str, Any]) -> None:
    for name in ("training", "serving"):
        entry = built[name]
        assert entry["tags"] == [f"{built['_repository']}/{name}:{entry['version']}"]
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", entry["digest"])
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", entry["image_id"])
        assert entry["builder"] == "buildah" and entry["size_bytes"] > 100e6 and not entry["pushed"]
        assert buildah.image_digest(entry["tags"][0]) == entry["digest"]
    # No --bundle: the tiny random model, labelled model version 0; it was trained on no dataset.
    # Local bases: each tag carries its own build key, never the production tag of the commit.
    training, serving = (Version.parse(built[n]["version"]) for n in ("training", "serving"))
    assert (training.sha, training.dirty) == (serving.sha, serving.dirty) and serving.model_version == "0"
    assert (
        training.local == built["training"]["build_key"][:8]
        and serving.local == built["serving"]["build_key"][:8]
    )
    assert (
        built["training"]["torch"].startswith("2.13.") and built["training"]["cuda"] is None
    )  # CPU stand-in
    assert (
        built["serving"]["labels"]["eu.ml-platform.bundle.metadata-sha256"]
        == built["serving"]["bundle_metadata_sha256"]
    )
    assert built["serving"]["model_version"] == "0"
    assert built["serving"]["dataset_manifest_sha256"] == "unknown"


def test_training_image_config(built: dict[str, Any]) -> None:
    entry = built["training"]
    config = buildah.image_config(entry["tags"][0])
    labels = _labels(entry["tags"][0])
    assert labels["org.opencontainers.image.version"] == entry["version"]
    assert re.fullmatch(r"[0-9a-f]{40}|uncommitted", labels["org.opencontainers.image.revision"])
    assert labels["org.opencontainers.image.created"].endswith("Z")
    assert config["User"] == "10001:10001"
    assert config["StopSignal"] == "SIGTERM"
    assert config["Entrypoint"] == ["python", "-m", "training"]


def test_serving_image_config(built: dict[str, Any]) -> None:
    entry = built["serving"]
    config = buildah.image_config(entry["tags"][0])
    labels = _labels(entry["tags"][0])
    assert labels["eu.ml-platform.model.version"] == "0"
    assert labels["eu.ml-platform.dataset.manifest-sha256"] == entry["dataset_manifest_sha256"]
    assert config["User"] == "10002:10002"
    assert set(config["ExposedPorts"]) == {"8000/tcp", "8001/tcp", "8002/tcp"}
    assert "/v2/health/ready" in " ".join(config["Healthcheck"]["Test"])
    cmd = config["Cmd"]
    assert cmd[0] == "tritonserver"
    for flag in (
        "--model-repository=/models",
        "--model-control-mode=none",
        "--strict-readiness=true",
        "--exit-on-error=true",
    ):
        assert flag in cmd


def test_no_credentials_or_build_leftovers(built: dict[str, Any]) -> None:
    for name in ("training", "serving"):
        ref = built[name]["tags"][0]
        env_names = [e.partition("=")[0] for e in buildah.image_config(ref).get("Env") or []]
        assert not [n for n in env_names if _SECRET_NAME.search(n)]
        with smoke.WorkingContainer(ref) as ctr:
            root = ctr.mount()
            try:
                # The deps stage's wheels and the build context stay out of the final image.
                for leftover in (
                    "wheels",
                    "build",
                    "root/.cache/pip",
                    "root/.aws",
                    "root/.netrc",
                    "root/.docker",
                ):
                    assert not (root / leftover).exists(), f"{name}: /{leftover}"
                # Public CA bundles (certifi's cacert.pem) are fine; private keys are not.
                keys = [
                    p
                    for pattern in ("*.pem", "*.key", "id_rsa*", "id_ed25519*")
                    for p in (root / "opt").rglob(pattern)
                    if p.is_file() and b"PRIVATE KEY" in p.read_bytes()[:65536]
                ]
                assert not keys, f"{name}: {keys}"
                assert not list((root / "opt").rglob(".env")), name
            finally:
                buildah.run(["unmount", ctr.id])


def test_sboms_list_the_os_packages_dpkg_reports_and_tritonserver(built: dict[str, Any]) -> None:
    """The SBOM each build wrote lists every installed deb at the version dpkg gives inside the
    image (libc6, openssl's libssl3 and python3 among them), and the serving image's Triton."""
    for name in ("training", "serving"):
        bom = json.loads(Path(built[name]["sbom"]).read_text())
        debs = {
            c["name"]: c["version"]
            for c in bom["components"]
            if c.get("purl", "").startswith("pkg:deb/debian/")
        }
        fmt = "${Package}\t${Version}\t${db:Status-Abbrev}\n"
        with smoke.WorkingContainer(built[name]["tags"][0]) as ctr:
            rows = [line.split("\t") for line in ctr.run(["dpkg-query", "-W", "-f", fmt]).stdout.splitlines()]
        assert debs == {pkg: version for pkg, version, state in rows if state.startswith("ii")}, name
        assert {"libc6", "libssl3", "python3"} <= set(debs), name
        triton = [c["version"] for c in bom["components"] if c["name"] == "tritonserver"]
        assert triton == (["2.51.0"] if name == "serving" else []), name


def test_training_image_runs_a_smoke_training(built: dict[str, Any]) -> None:
    result = smoke.smoke_training(built["training"]["tags"][0])
    assert result["uid"] == 10001
    assert 0.0 <= result["test_accuracy"] <= 1.0 and result["steps"] > 0
    # The drift CronJob's command ran in this image as its pod runs it (read-only root, /tmp an emptyDir):
    # it wrote drift.json and drift.html under /tmp and nothing into the root.
    assert result["drift_job"]["read_only_root"] is True


def test_serving_image_answers_ready_and_infers(built: dict[str, Any]) -> None:
    shm = Path("/dev/shm")
    before = set(shm.glob("triton_python_backend_shm_region_*"))
    result = smoke.smoke_serving(built["serving"]["tags"][0])
    # The image's Triton (default region names) was stopped with its stubs: nothing of it stays on the host.
    left = [
        p.name
        for p in set(shm.glob("triton_python_backend_shm_region_*")) - before
        if p.stat().st_uid == 10002
    ]
    assert not left, f"the smoke left shared memory in the host's /dev/shm: {left}"
    assert {"classifier", "sentiment"} <= set(result["models"])
    assert result["tritonserver"] is True  # the local base carries the real tritonserver
    assert result["label"] in ("negative", "positive")
    assert abs(sum(result["probabilities"]) - 1.0) < 1e-4


@contextlib.contextmanager
def _derived(built: dict[str, Any], name: str, run_as_root: str, config: list[str]) -> Iterator[str]:
    """The built serving image plus one root shell step and `buildah config` options, committed (docker
    format keeps the HEALTHCHECK) under the test's repository; removed on exit."""
    ref = f"{built['_repository']}/serving-{name}:test"
    ctr = buildah.run(["from", "--pull=never", built["serving"]["tags"][0]]).strip()
    try:
        buildah.run(
            ["run", "--isolation", buildah.ISOLATION, "--user", "0:0", ctr, "--", "sh", "-c", run_as_root]
        )
        buildah.run(["config", *config, ctr])
        buildah.run(["commit", "--quiet", "--format", "docker", "--rm", ctr, ref])
    except BaseException:
        buildah.run(["rm", ctr], check=False)
        raise
    try:
        yield ref
    finally:
        buildah.run(["rmi", "--force", ref], check=False)


def test_serving_smoke_refuses_an_image_that_writes_to_its_root(built: dict[str, Any]) -> None:
    """A start script that warms a cache in a folder the image gives its user: a writable root let it pass,
    the pod's read-only root stops it. The smoke says which path, and where to write instead."""
    script = "echo warm > /var/cache/sentiment/warm && exec tritonserver --model-repository=/models"
    cache = "install -d -o 10002 -g 10002 /var/cache/sentiment"
    config = ["--cmd", json.dumps(["sh", "-c", script])]
    with _derived(built, "writes-root", cache, config) as ref, pytest.raises(ContainerError) as err:
        smoke.smoke_serving(ref)
    message = str(err.value)
    assert "writes to its root filesystem, which the pod mounts read-only" in message, message
    assert ": /var/cache/sentiment/warm. Write under /tmp" in message, message


def test_serving_smoke_gives_triton_a_fresh_tmp_as_the_pod_does(built: dict[str, Any]) -> None:
    """An image whose own /tmp its user cannot write: the python backend aborted with "Failed to create
    temporary directory for Python environments" (mkdtemp under /tmp, as in CI) where the pod's /tmp emptyDir
    would serve. The smoke gives Triton a fresh /tmp as the pod does, so it serves."""
    with _derived(built, "tmp-0755", "chmod 0755 /tmp", []) as ref:
        result = smoke.smoke_serving(ref)
    assert result["label"] in ("negative", "positive")


def test_existing_tag_is_reused_not_moved(built: dict[str, Any]) -> None:
    # The same version again (not recomputed: other edits to the tree would make it another one).
    entry = built["training"]
    spec = build.ImageSpec(
        image="training",
        version=Version.parse(entry["version"]),
        base_image=entry["base_image"],
        repository=built["_repository"],
    )
    start = time.monotonic()
    again = build.build_image(spec, builder="buildah")
    assert again["reused_existing_tag"] is True
    assert again["image_id"] == entry["image_id"] and again["digest"] == entry["digest"]
    assert time.monotonic() - start < 60  # found, not rebuilt


def test_buildah_push_records_a_pull_confirmed_reference(
    built: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Push to a real registry (distribution 2.8 on a free 127.0.0.1 port, plain HTTP because it is
    on loopback); the record gets `<registry>/serving@<digest>` only after a pull by it agreed."""
    if shutil.which("docker-registry") is None:
        pytest.skip("docker-registry is not installed (apt-get install -y docker-registry)")
    entry = dict(built["serving"], tags=list(built["serving"]["tags"]))
    with services.oci_registry(tmp_path_factory.mktemp("registry")) as reg:
        publish.push(entry, f"{reg}/serving", Version.parse(entry["version"]), builder="buildah", client=None)
        assert entry["pushed"] and entry["pull_verified"]
        assert entry["reference"] == f"{reg}/serving@{entry['digest']}"
        assert entry["local_digest"] == built["serving"]["digest"]
        assert registry.manifest_digest(entry["reference"]) == entry["digest"]
        buildah.run(["rmi", "--force", entry["reference"]], check=False)
        assert registry.buildah_pull_digest(entry["reference"]) == entry["digest"]  # a real pull
        buildah.run(["rmi", "--force", entry["reference"]], check=False)
