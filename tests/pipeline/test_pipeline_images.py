"""The `images` step against a real OCI registry (distribution's `docker-registry` on 127.0.0.1).

Images are pushed with the Registry HTTP API v2 itself (a config blob with labels, a layer, a manifest): what the
step reads is exactly what CI's push leaves behind, without a container engine. Through the real CLI
(`python -m pipeline step images`), then promotion's own gates read the build record the step writes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline import images as resolver
from pipeline.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("docker-registry") is None:
        pytest.skip("docker-registry is not installed (apt-get install -y docker-registry)")
    from containers import services

    with services.oci_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


def _blob(address: str, repo: str, data: bytes, auth: dict[str, str]) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    start = urllib.request.Request(f"http://{address}/v2/{repo}/blobs/uploads/", method="POST", headers=auth)
    with urllib.request.urlopen(start) as resp:
        location = resp.headers["Location"]
    url = location if location.startswith("http") else f"http://{address}{location}"
    sep = "&" if "?" in url else "?"
    put = urllib.request.Request(
        f"{url}{sep}digest={digest}",
        data=data,
        method="PUT",
        headers={"Content-Type": "application/octet-stream", **auth},
    )
    urllib.request.urlopen(put).close()
    return digest


def push(
    address: str, repo: str, labels: dict[str, str], tag: str = "1", auth: dict[str, str] | None = None
) -> str:
    """An image whose config carries `labels`; returns the manifest digest the registry answers with.

    `auth`: extra headers (an Authorization) for a registry that refuses anonymous pushes."""
    auth = auth or {}
    config = json.dumps(
        {"architecture": "amd64", "os": "linux", "config": {"Labels": labels}, "rootfs": {"type": "layers"}}
    ).encode()
    layer = b"layer-of-" + repo.encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": _blob(address, repo, config, auth),
            "size": len(config),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": _blob(address, repo, layer, auth),
                "size": len(layer),
            }
        ],
    }
    put = urllib.request.Request(
        f"http://{address}/v2/{repo}/manifests/{tag}",
        data=json.dumps(manifest).encode(),
        method="PUT",
        headers={"Content-Type": manifest["mediaType"], **auth},
    )
    with urllib.request.urlopen(put) as resp:
        return resp.headers["Docker-Content-Digest"]


def candidate(tmp_path: Path) -> tuple[Path, str]:
    work = tmp_path / "work"
    export = work / "candidate" / "export"
    export.mkdir(parents=True)
    (export / "metadata.json").write_text(json.dumps({"model_name": "sentiment", "n": str(tmp_path)}))
    return work, resolver.bundle_sha256(export)


def step(work: Path, training: str, serving: str) -> tuple[int, str]:
    flag = work / "flag"
    rc = main(
        ["step", "images", "--work", str(work), "--training-image", training, "--serving-image", serving]
        + ["--local", "false", "--flag-file", str(flag)]
    )
    return rc, flag.read_text() if flag.exists() else ""


def test_images_built_from_the_candidates_bundle_are_verified_and_recorded(
    registry: str, tmp_path: Path
) -> None:
    from promotion import gates, sequence
    from promotion.config import load_config

    work, sha = candidate(tmp_path)
    training = f"{registry}/mlp/training@" + push(
        registry, "mlp/training", {"org.opencontainers.image.revision": "abc"}
    )
    serving = f"{registry}/mlp/serving:1@" + push(registry, "mlp/serving", {resolver.BUNDLE_LABEL: sha})
    rc, flag = step(work, training, serving)
    assert rc == 0 and flag == "true"
    record = json.loads((work / "candidate" / "build-record.json").read_text())
    assert record["images"]["serving"]["reference"] == serving.replace(":1@", "@")
    assert record["images"]["training"]["labels"] == {"org.opencontainers.image.revision": "abc"}
    # The record is what promotion's own gates read (pipeline/steps.py passes it as --build-record).
    assert sequence.image_carries_bundle(record, sha, local_run=False).status == "pass"
    dev = load_config(None).environment("dev")
    assert gates.images_pinned(record, dev, local_run=False).status == "pass"


def test_a_serving_image_of_another_bundle_skips_promotion_and_says_why(
    registry: str, tmp_path: Path
) -> None:
    work, _ = candidate(tmp_path)
    training = f"{registry}/mlp/training@" + push(registry, "mlp/training", {})
    serving = f"{registry}/mlp/serving@" + push(
        registry, "mlp/serving", {resolver.BUNDLE_LABEL: "0" * 64}, "2"
    )
    rc, flag = step(work, training, serving)
    assert rc == 0 and flag == "false"
    decision = json.loads((work / "decisions" / "images.json").read_text())
    assert decision["ready"] is False and "main.yml" in decision["reasons"][0]


def test_tags_and_unknown_digests_are_refused(registry: str, tmp_path: Path) -> None:
    work, _ = candidate(tmp_path)
    training = f"{registry}/mlp/training@" + push(registry, "mlp/training", {})
    assert step(work, training, f"{registry}/mlp/serving:1")[0] == 2  # a tag: usage error, says pin by digest
    missing = f"{registry}/mlp/serving@sha256:" + "f" * 64
    assert step(work, training, missing)[0] == 1  # the registry does not hold it
