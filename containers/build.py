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
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from containers import buildah, docker_engine, localbase, requirements, sbom, wheelhouse
from containers.errors import ContainerError
from containers.image_build import (  # re-exported: the build's public names stay `containers.build.*`
    LOCAL_REPOSITORY,
    Builder,
    ImageSpec,
    build_args,
    build_image,
    buildah_command,
    pinned_base,
)
from containers.model_repository import MODEL_REPOSITORY_CONTEXT, model_inputs, prepare_model_repository
from containers.provenance import BUILD_KEY_LABEL, build_key, git_metadata
from containers.publish import IMAGES, check_registry, check_target, push, registry_repositories
from containers.version import REPO_ROOT, Version, compute

if TYPE_CHECKING:
    from serving.repository import Backend

RECORD = REPO_ROOT / "reports/images/build-record.json"

__all__ = [
    "BUILD_KEY_LABEL",
    "LOCAL_REPOSITORY",
    "RECORD",
    "ImageSpec",
    "build_args",
    "build_image",
    "buildah_command",
    "main",
    "pinned_base",
    "write_record",
]


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


@dataclass(frozen=True, slots=True)
class _Planned:
    spec: ImageSpec
    offline: bool
    """Local bases run the host's Python: the build gets the host's wheels and stays offline."""


def _plan(
    image: str, args: argparse.Namespace, base: str, builder: Builder, client: Any, version: Version
) -> _Planned:
    """Everything one image's build needs, its build key included; builds nothing."""
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
        model_tree = model_inputs(bundle=args.bundle, model_repository=args.model_repository, backend=backend)
        image_version = version.for_model(labels["model_version"])
        spec_args = {
            "MODEL_REPOSITORY": MODEL_REPOSITORY_CONTEXT,
            "MODEL_VERSION": labels["model_version"],
            "DATASET_MANIFEST_SHA256": labels["dataset_manifest_sha256"],
            "BUNDLE_METADATA_SHA256": labels["bundle_metadata_sha256"],
        }
    key = build_key(image, image_version, base_digest=base_digest, model_tree=model_tree)
    offline = base == "local"
    if offline:
        image_version = image_version.on_local_base(key)  # never a production tag
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
    return _Planned(spec, offline)


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
    images = args.only or IMAGES
    requirements.check_current(images)
    repos = registry_repositories(args.stack, args.registry) if args.push else {}
    version = compute()
    for image in images if args.push else ():
        # Before minutes of building: a target the push would refuse, a registry down or refusing this machine.
        check_target(repos[image], version.on_local_base("0" * 8) if base == "local" else version)
        check_registry(repos[image], version.tag)
    # Every image's key and tag first, then the builds: a tag the push would refuse to move (the serving one
    # too) ends the run before the training image is built and pushed, so "Nothing was built" holds.
    plans = [_plan(image, args, base, builder, client, version) for image in images]
    for plan in plans if args.push else ():
        check_registry(repos[plan.spec.image], plan.spec.version.tag, plan.spec.build_key)
    epoch = git_metadata()["SOURCE_DATE_EPOCH"]
    entries: dict[str, dict[str, Any]] = {}
    for plan in plans:
        spec, image = plan.spec, plan.spec.image
        wheelhouse.prepare(image, empty=not plan.offline)
        print(
            f"containers.build: {spec.ref} with {builder} on {spec.base_image or pinned_base(image)}",
            file=sys.stderr,
        )
        entry = build_image(spec, builder=builder, client=client, offline=plan.offline)
        _inspect(entry, builder, client, epoch, args.record.parent / "sbom")
        if args.smoke:
            entry["smoke"] = _smoke(entry, builder, client)
        if args.push:
            push(entry, repos[image], spec.version, builder=builder, client=client)
        entries[image] = entry
        # Recorded as soon as it stands: a later image's failure must not leave this one pushed but unrecorded.
        write_record({image: entry}, args.record)
    return entries


if __name__ == "__main__":
    raise SystemExit(main())
