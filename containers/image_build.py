"""Build one image, or reuse the tag it would get when the image under it carries the same build key.

Docker engine (classic builder, through the `docker` SDK) or buildah (`bud --isolation chroot`); the entry point
that plans, builds, smoke-tests and pushes both images is containers/build.py.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from containers import buildah, docker_engine
from containers.errors import ContainerError
from containers.provenance import BUILD_KEY_LABEL, git_metadata
from containers.publish import IMAGES
from containers.version import REPO_ROOT, Version

LOCAL_REPOSITORY = "localhost/eu-ml-platform"
Builder = Literal["docker", "buildah"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageSpec:
    """One image to build."""

    image: str
    """training or serving."""
    version: Version
    base_image: str | None = None
    """BASE_IMAGE build argument; None keeps the Dockerfile's pinned default."""
    repository: str = LOCAL_REPOSITORY
    """Local name prefix: the image is `<repository>/<image>:<version>`."""
    build_args: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    """Extra record fields (serving: model_version, dataset_manifest_sha256)."""
    build_key: str = ""
    """sha256 of every input (`build_key()`), stored as a label; '' skips the reuse check."""
    base_digest: str | None = None
    """Digest of the base actually used."""

    @property
    def extra_labels(self) -> dict[str, str]:
        return {BUILD_KEY_LABEL: self.build_key} if self.build_key else {}

    def __post_init__(self) -> None:
        if self.image not in IMAGES:
            raise ContainerError(f"unknown image {self.image!r}: choose one of {', '.join(IMAGES)}")

    @property
    def dockerfile(self) -> Path:
        return REPO_ROOT / "containers" / self.image / "Dockerfile"

    @property
    def name(self) -> str:
        return f"{self.repository}/{self.image}"

    @property
    def ref(self) -> str:
        return f"{self.name}:{self.version.tag}"


def build_args(spec: ImageSpec, meta: dict[str, str]) -> dict[str, str]:
    args = {
        "VERSION": spec.version.tag,
        "REVISION": meta["REVISION"],
        "CREATED": meta["CREATED"],
        "SOURCE": meta["SOURCE"],
        **spec.build_args,
    }
    if spec.base_image:
        args["BASE_IMAGE"] = spec.base_image
    return args


def buildah_command(spec: ImageSpec, args: dict[str, str], epoch: str, iidfile: Path) -> list[str]:
    # docker format: the OCI format has no HEALTHCHECK. --timestamp: the commit's time on every
    # file and on the image, so the same source gives the same layers.
    # --pull=false: pull a base only when it is not in local storage (digest-pinned, so never stale).
    cmd = [
        "bud",
        "--isolation",
        buildah.ISOLATION,
        "--format",
        "docker",
        "--pull=false",
        "--timestamp",
        epoch,
    ]
    cmd += ["--file", str(spec.dockerfile), "--tag", spec.ref, "--iidfile", str(iidfile)]
    for key, value in sorted(spec.extra_labels.items()):
        cmd += ["--label", f"{key}={value}"]
    for key, value in sorted(args.items()):
        cmd += ["--build-arg", f"{key}={value}"]
    return [*cmd, str(REPO_ROOT)]


def _build_buildah(spec: ImageSpec, args: dict[str, str], epoch: str) -> str:
    with tempfile.TemporaryDirectory(prefix="iid-") as tmp:
        iidfile = Path(tmp) / "iid"
        buildah.run(buildah_command(spec, args, epoch, iidfile), capture=False)
        return iidfile.read_text().strip()


def _existing_key(ref: str, *, builder: Builder, client: Any) -> str | None:
    """The build key label of an image already stored under `ref`, '' if unlabelled, None if absent."""
    if builder == "buildah":
        if not buildah.image_exists(ref):
            return None
        labels = buildah.image_config(ref).get("Labels") or {}
    else:
        if not docker_engine.image_exists(client, ref):
            return None
        labels = docker_engine.image_facts(client, ref)["labels"]
    return str(labels.get(BUILD_KEY_LABEL, ""))


def build_image(
    spec: ImageSpec, *, builder: Builder, client: Any = None, offline: bool = True
) -> dict[str, Any]:
    """Build one image (or reuse its existing tag when its build key matches) and return its record entry."""
    meta = git_metadata()
    args = build_args(spec, meta)
    start = time.monotonic()
    existing = _existing_key(spec.ref, builder=builder, client=client)
    reused = existing is not None
    if existing is not None and spec.build_key and existing != spec.build_key:
        # Tags never move: the same tag with other inputs would make two images one name.
        raise ContainerError(
            f"{spec.ref} exists but was built from other inputs (build key {existing[:12] or 'none'} "
            f"!= {spec.build_key[:12]}): commit the change (a new version) or remove the old image"
        )
    if builder == "buildah":
        if not reused:
            _build_buildah(spec, args, meta["SOURCE_DATE_EPOCH"])
        image_id = buildah.image_id(spec.ref)
        digest = buildah.image_digest(spec.ref)
        size = buildah.image_size(spec.ref)
    else:
        if not reused:
            docker_engine.build(
                client,
                dockerfile=spec.dockerfile,
                tag=spec.ref,
                args=args,
                labels=spec.extra_labels,
                offline=offline,
            )
        facts = docker_engine.image_facts(client, spec.ref)
        image_id, size = facts["image_id"], facts["size_bytes"]
        # A never-pushed image has no repository digest: until --push, the local image id.
        digest = image_id
    return {
        "name": spec.name,
        "version": spec.version.tag,
        "tags": [spec.ref],
        "digest": digest,
        "reference": None,
        "image_id": image_id if image_id.startswith("sha256:") else f"sha256:{image_id}",
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "builder": builder,
        "reused_existing_tag": reused,
        "build_key": spec.build_key,
        "base_image": args.get("BASE_IMAGE") or pinned_base(spec.image),
        "base_digest": spec.base_digest,
        "local_base": spec.version.local is not None,
        "size_bytes": size,
        "build_seconds": round(time.monotonic() - start, 1),
        "pushed": False,
        # Read back from the built image: what the image carries, not what we asked for.
        "labels": _image_labels(spec.ref, builder, client),
        **spec.labels,
    }


def _image_labels(ref: str, builder: Builder, client: Any) -> dict[str, str]:
    if builder == "buildah":
        return dict(buildah.image_config(ref).get("Labels") or {})
    return dict(docker_engine.image_facts(client, ref)["labels"])


def pinned_base(image: str) -> str:
    """The Dockerfile's default BASE_IMAGE (NVIDIA's, pinned by digest), read with dockerfile-parse."""
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(str(REPO_ROOT / "containers" / image / "Dockerfile"))
    return str(parser.baseimage)
