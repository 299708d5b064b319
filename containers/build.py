"""Build, smoke-test (and push) the training and serving images; write the build record.

    python -m containers.build                          # both images (what `make images` runs)
    python -m containers.build --only serving --bundle runs/demo/export --model-version 3
    python -m containers.build --push --registry 127.0.0.1:5000   # a local registry: plain HTTP
    python -m containers.build --push --stack dev       # the stack's registry (TLS)

Builder: a Docker engine through the `docker` SDK's public API (the engine's classic builder)
when one answers, else buildah (`bud --isolation chroot`). Base images: NVIDIA's (the digests in
the Dockerfiles) where they are at hand, else the local stand-ins of `containers.localbase`;
images on a stand-in base get `-local.<key>` in their tag and never the production tag.

An existing tag is reused only when the image under it carries the same build key (base digest,
locks, revision, model): tags never move. Each image's Python inventory is read inside it
(SBOM next to the record, torch/CUDA for training), then it is smoke-run, then pushed; a push is
recorded as `<registry>/<repo>@sha256:...` only after a pull by that reference confirmed it.
The record's fields are documented in containers/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from containers import buildah, docker_engine, localbase, requirements, sbom, wheelhouse
from containers.errors import ContainerError
from containers.model_repository import MODEL_REPOSITORY_CONTEXT, model_inputs, prepare_model_repository
from containers.provenance import BUILD_KEY_LABEL, build_key, git_metadata
from containers.publish import IMAGES, check_registry, check_target, push, registry_repositories
from containers.version import REPO_ROOT, Version, compute

if TYPE_CHECKING:
    from serving.repository import Backend

LOCAL_REPOSITORY = "localhost/eu-ml-platform"
RECORD = REPO_ROOT / "reports/images/build-record.json"

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


# --- entry point ----------------------------------------------------------------------------------
def write_record(entries: dict[str, dict[str, Any]], path: Path = RECORD) -> None:
    """Merge into the existing record: `--only serving` keeps the training entry."""
    record: dict[str, Any] = {"images": {}}
    if path.is_file():
        record = json.loads(path.read_text())
    record["images"].update(entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m containers.build", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", choices=IMAGES, action="append", help="build this image (repeatable; default: both)"
    )
    parser.add_argument(
        "--smoke",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="smoke-run each image before any push",
    )
    parser.add_argument("--push", action="store_true", help="push to the registry of --stack (or --registry)")
    parser.add_argument("--stack", help="stack whose output image_repositories names the registry")
    parser.add_argument(
        "--registry",
        help="<host>[:port][/path] to push to, instead of the stack output (loopback: plain HTTP; others: TLS)",
    )
    parser.add_argument("--builder", choices=("auto", "docker", "buildah"), default="auto")
    parser.add_argument(
        "--base",
        choices=("auto", "nvidia", "local"),
        default="auto",
        help="auto: local when no NVIDIA image is at hand",
    )
    parser.add_argument(
        "--bundle", type=Path, help="export bundle the serving image serves (default: a tiny model)"
    )
    parser.add_argument(
        "--model-repository", type=Path, help="an existing `python -m serving build` repository"
    )
    parser.add_argument("--model-version", type=int, help="version number of the bundle in the repository")
    parser.add_argument(
        "--backend", choices=("onnxruntime", "python"), help="classifier backend (default: per base)"
    )
    parser.add_argument("--repository", default=LOCAL_REPOSITORY, help="local image name prefix")
    parser.add_argument("--record", type=Path, default=RECORD)
    args = parser.parse_args(argv)
    try:
        entries = run(args)
    except ContainerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for image, entry in entries.items():
        print(
            f"{image}: {entry['reference'] or entry['tags'][0]} ({entry['size_bytes'] / 1e6:.0f} MB, "
            f"{entry['build_seconds']} s, SBOM {entry['sbom']})"
        )
    print(f"record: {args.record}")
    return 0


def _choose_builder(choice: str) -> tuple[Builder, Any]:
    client = docker_engine.connect() if choice in ("auto", "docker") else None
    if choice == "docker" and client is None:
        raise ContainerError("no Docker engine answers (DOCKER_HOST / the socket); use --builder buildah")
    if client is None and not buildah.available():
        raise ContainerError(
            "neither a Docker engine nor buildah: start Docker, or `apt-get install -y buildah`"
        )
    return ("docker" if client is not None else "buildah"), client


def _base(image: str, base: str, builder: Builder, client: Any) -> tuple[str | None, str]:
    """(BASE_IMAGE build argument or None for the Dockerfile's pin, the base's digest)."""
    if base != "local":
        pinned = pinned_base(image)
        return None, pinned.partition("@")[2]
    ref = localbase.ensure(image).ref  # made with buildah (debootstrap); cached in its storage
    if builder == "docker":
        docker_engine.load_from_buildah(client, ref)
    return ref, buildah.image_digest(ref)


def _inspect(entry: dict[str, Any], builder: Builder, client: Any, epoch: str, sbom_dir: Path) -> None:
    """Inventory of the image's own Python, its SBOM next to the record, torch/CUDA for training."""
    ref = entry["tags"][0]
    found = sbom.inventory_docker(client, ref) if builder == "docker" else sbom.inventory_buildah(ref)
    image = "training" if entry["name"].endswith("/training") else "serving"
    path = sbom.write_sbom(found, sbom_dir / f"{image}.cdx.json", epoch=epoch, image=entry)
    entry["sbom"] = str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)
    entry["python"] = found["python"]
    if image == "training":
        sbom.check_torch(found, requirements.lock_pins()["torch"])
        entry["torch"], entry["cuda"] = found["torch"], found["cuda"]


def _smoke(entry: dict[str, Any], builder: Builder, client: Any) -> dict[str, Any]:
    from containers import smoke

    ref = entry["tags"][0]
    training = entry["name"].endswith("/training")
    if builder == "docker":
        check = docker_engine.smoke_training if training else docker_engine.smoke_serving
        return check(client, ref)
    return smoke.smoke_training(ref) if training else smoke.smoke_serving(ref)


def run(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    builder, client = _choose_builder(args.builder)
    base = args.base
    if base == "auto":
        nvidia_at_hand = builder == "docker" and all(
            docker_engine.image_exists(client, pinned_base(i)) for i in IMAGES
        )
        base = "nvidia" if nvidia_at_hand else "local"
        if base == "local":
            print(
                "containers.build: NVIDIA's bases are not at hand: local stand-ins (containers.localbase)",
                file=sys.stderr,
            )
    requirements.check_current(args.only or IMAGES)
    repos = registry_repositories(args.stack, args.registry) if args.push else {}
    version = compute()
    for image in (args.only or IMAGES) if args.push else ():
        # Before minutes of building: a target the push would refuse, a registry down or refusing this machine.
        check_target(repos[image], version.on_local_base("0" * 8) if base == "local" else version)
        check_registry(repos[image], version.tag)
    epoch = git_metadata()["SOURCE_DATE_EPOCH"]
    entries: dict[str, dict[str, Any]] = {}
    for image in args.only or IMAGES:
        base_image, base_digest = _base(image, base, builder, client)
        labels: dict[str, str] = {}
        image_version = version
        spec_args: dict[str, str] = {}
        model_tree = None
        if image == "serving":
            backend: Backend = args.backend or ("python" if base == "local" else "onnxruntime")
            labels = prepare_model_repository(
                bundle=args.bundle,
                model_repository=args.model_repository,
                model_version=args.model_version,
                backend=backend,
            )
            model_tree = model_inputs(
                bundle=args.bundle, model_repository=args.model_repository, backend=backend
            )
            image_version = version.for_model(labels["model_version"])
            spec_args = {
                "MODEL_REPOSITORY": MODEL_REPOSITORY_CONTEXT,
                "MODEL_VERSION": labels["model_version"],
                "DATASET_MANIFEST_SHA256": labels["dataset_manifest_sha256"],
                "BUNDLE_METADATA_SHA256": labels["bundle_metadata_sha256"],
            }
        key = build_key(image, image_version, base_digest=base_digest, model_tree=model_tree)
        if base == "local":
            image_version = image_version.on_local_base(key)  # never a production tag
        if args.push:
            check_registry(repos[image], image_version.tag, key)  # a tag the push would refuse to move
        # Local bases run the host's Python: hand the build the host's wheels and keep it offline.
        offline = base == "local"
        wheelhouse.prepare(image, empty=not offline)
        if offline:
            spec_args["PIP_NO_INDEX"] = "1"
        spec = ImageSpec(
            image=image,
            version=image_version,
            base_image=base_image,
            repository=args.repository,
            build_args=spec_args,
            labels=labels,
            build_key=key,
            base_digest=base_digest,
        )
        print(
            f"containers.build: {spec.ref} with {builder} on {base_image or pinned_base(image)}",
            file=sys.stderr,
        )
        entry = build_image(spec, builder=builder, client=client, offline=offline)
        _inspect(entry, builder, client, epoch, args.record.parent / "sbom")
        if args.smoke:
            entry["smoke"] = _smoke(entry, builder, client)
        if args.push:
            push(entry, repos[image], image_version, builder=builder, client=client)
        entries[image] = entry
    write_record(entries, args.record)
    return entries


if __name__ == "__main__":
    raise SystemExit(main())
