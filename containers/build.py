"""Build (and push) the training and serving images; write the build record.

    python -m containers.build                          # both images (what `make images` runs)
    python -m containers.build --only serving --bundle runs/demo/export --model-version 3
    python -m containers.build --push --stack dev       # push to the stack's registry

Builder: Docker (BuildKit, through the `docker` Python SDK) when an engine answers, else buildah
(`bud --isolation chroot`, vfs storage), as on the CI machines. Base images: NVIDIA's (the digests
in the Dockerfiles) where they can be had; on a machine with no Docker engine and no NVIDIA image
in buildah's storage, the local stand-ins of `containers.localbase` (`--base local`).

Versions come from `containers.version`; an existing tag is never re-pointed: if the local
storage already holds this version, it is reused, not rebuilt. Builds are reproducible as far as
the tools allow: every layer and the image's created time use the commit's timestamp.

The record, `reports/images/build-record.json` (promotion and the infra config read it):
    {"images": {"training": {"name", "version", "tags", "digest", "image_id", "built_at", "builder",
                             "base_image", "size_bytes", "build_seconds", "pushed"},
                "serving": {..., "model_version", "dataset_manifest_sha256"}}}
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from containers import buildah, localbase, wheelhouse
from containers.errors import ContainerError
from containers.version import REPO_ROOT, Version, compute

IMAGES = ("training", "serving")
LOCAL_REPOSITORY = "localhost/eu-ml-platform"
RECORD = REPO_ROOT / "reports/images/build-record.json"
# Inside the build context and let in by .dockerignore; the serving Dockerfile's MODEL_REPOSITORY.
MODEL_REPOSITORY_CONTEXT = "build/images/serving/model_repository"

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


def docker_engine() -> Any | None:
    """A connected docker client, or None when no engine answers (lazy import: buildah users skip it)."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        return client
    except Exception:
        return None


def git_metadata(root: Path = REPO_ROOT) -> dict[str, str]:
    """Revision, source URL and the commit time (the reproducible 'created')."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    epoch = git("log", "-1", "--format=%ct") or "0"
    created = dt.datetime.fromtimestamp(int(epoch), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "REVISION": git("rev-parse", "HEAD") or "uncommitted",
        "SOURCE": git("remote", "get-url", "origin") or "https://example.invalid/eu-ml-platform",
        "CREATED": created,
        "SOURCE_DATE_EPOCH": epoch,
    }


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
    for key, value in sorted(args.items()):
        cmd += ["--build-arg", f"{key}={value}"]
    return [*cmd, str(REPO_ROOT)]


def _build_buildah(spec: ImageSpec, args: dict[str, str], epoch: str) -> str:
    with tempfile.TemporaryDirectory(prefix="iid-") as tmp:
        iidfile = Path(tmp) / "iid"
        buildah.run(buildah_command(spec, args, epoch, iidfile), capture=False)
        return iidfile.read_text().strip()


def _build_docker(client: Any, spec: ImageSpec, args: dict[str, str], epoch: str) -> str:
    """BuildKit through the Engine API (`version=2`), which docker-py's build() does not expose."""
    from docker import utils

    # The context as `docker build` sends it: the repository root filtered by .dockerignore.
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    exclude = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    dockerfile = str(spec.dockerfile.relative_to(REPO_ROOT))
    context = utils.tar(str(REPO_ROOT), exclude=exclude, dockerfile=(dockerfile, None))
    params = {
        "dockerfile": dockerfile,
        "t": spec.ref,
        "buildargs": json.dumps({**args, "SOURCE_DATE_EPOCH": epoch}),
        "version": "2",
        "rm": "1",
    }
    api = client.api
    response = api._post(
        api._url("/build"),
        params=params,
        data=context,
        headers={"Content-Type": "application/x-tar"},
        stream=True,
    )
    api._raise_for_status(response)
    image_id = ""
    for chunk in api._stream_helper(response, decode=True):
        if "error" in chunk:
            raise ContainerError(f"docker build of {spec.image} failed: {chunk['error']}")
        aux = chunk.get("aux") or {}
        if chunk.get("id") == "moby.image.id" and "ID" in aux:
            image_id = aux["ID"]
    return image_id or client.images.get(spec.ref).id


def build_image(spec: ImageSpec, *, builder: Builder, client: Any = None) -> dict[str, Any]:
    """Build one image (or reuse its existing tag) and return its record entry."""
    meta = git_metadata()
    args = build_args(spec, meta)
    start = time.monotonic()
    reused = False
    if builder == "buildah":
        if buildah.image_exists(spec.ref):
            reused = True  # tags never move: this version was built from this very tree already
            image_id = buildah.image_id(spec.ref)
        else:
            image_id = _build_buildah(spec, args, meta["SOURCE_DATE_EPOCH"])
        digest = buildah.image_digest(spec.ref)
        size = buildah.image_size(spec.ref)
    else:
        try:
            existing = client.images.get(spec.ref)
        except Exception:
            existing = None
        if existing is not None:
            reused, image_id = True, existing.id
        else:
            image_id = _build_docker(client, spec, args, meta["SOURCE_DATE_EPOCH"])
        image = client.images.get(spec.ref)
        digest = image.attrs.get("RepoDigests", [""])[0].partition("@")[2] or image_id
        size = int(image.attrs.get("Size", 0))
    return {
        "name": spec.name,
        "version": spec.version.tag,
        "tags": [spec.ref],
        "digest": digest,
        "image_id": image_id if image_id.startswith("sha256:") else f"sha256:{image_id}",
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "builder": builder,
        "reused_existing_tag": reused,
        "base_image": args.get("BASE_IMAGE", "(Dockerfile default)"),
        "size_bytes": size,
        "build_seconds": round(time.monotonic() - start, 1),
        "pushed": False,
        **spec.labels,
    }


# --- the serving image's model repository --------------------------------------------------------
def prepare_model_repository(
    *, bundle: Path | None, model_repository: Path | None, model_version: int | None, backend: str
) -> dict[str, str]:
    """Write the repository into the build context; return the model labels for the build."""
    target = REPO_ROOT / MODEL_REPOSITORY_CONTEXT
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    from serving import repository

    if model_repository is not None:
        shutil.copytree(model_repository, target, ignore=shutil.ignore_patterns("__pycache__", ".*.tmp"))
    else:
        from serving.repository import BuildOptions

        if bundle is None:
            # No model given: a tiny random model through the real export path, so the image (and
            # `make images` on a fresh clone) can still be built and checked. It is labelled m0.
            from training.export import make_tiny_bundle

            print(
                "containers.build: no --bundle given: baking a tiny random model as version 0",
                file=sys.stderr,
            )
            bundle = make_tiny_bundle(REPO_ROOT / "build/images/serving/tiny-bundle")
            version = repository.build(bundle, target, options=BuildOptions(backend=backend))
            return _model_labels(target, version, override="0")
        version = repository.build(
            bundle, target, version=model_version, options=BuildOptions(backend=backend)
        )
    manifest = repository.read_manifest(target)
    served = manifest.get("pinned") or max(int(v) for v in manifest["versions"])
    return _model_labels(target, int(served))


def _model_labels(repo: Path, version: int, override: str | None = None) -> dict[str, str]:
    from serving import repository

    entry = repository.read_manifest(repo)["versions"][str(version)]
    return {
        "model_version": override or str(version),
        "dataset_manifest_sha256": str(entry.get("dataset_manifest_sha256") or "unknown"),
    }


# --- push -----------------------------------------------------------------------------------------
def registry_repositories(stack: str | None, registry: str | None) -> dict[str, str]:
    """`{image: repository URL}`: from --registry, else the stack output `image_repositories`."""
    if registry:
        return {image: f"{registry.rstrip('/')}/{image}" for image in IMAGES}
    if not stack:
        raise ContainerError("--push needs --registry URL or --stack NAME (its output image_repositories)")
    if shutil.which("pulumi"):
        proc = subprocess.run(
            ["pulumi", "stack", "output", "image_repositories", "--json", "--stack", stack],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO_ROOT,
        )
        if proc.returncode == 0:
            return dict(json.loads(proc.stdout))
    plan = REPO_ROOT / "reports/plan" / f"{stack}.json"
    if plan.is_file():
        repos = json.loads(plan.read_text()).get("outputs", {}).get("image_repositories") or {}
        known = {k: v for k, v in repos.items() if isinstance(v, str) and "." in v.split("/")[0]}
        if set(IMAGES) <= known.keys():
            return known
    raise ContainerError(
        f"the registry of stack {stack!r} is not known yet (it exists after `pulumi up`); "
        "run with the Pulumi CLI logged in, or pass --registry <host>/<path>"
    )


def push(
    entry: dict[str, Any], repository_url: str, version: Version, *, builder: Builder, client: Any
) -> None:
    if version.dirty:
        raise ContainerError(
            f"refusing to push {entry['version']}: it was built from uncommitted changes; commit, then build again"
        )
    remote = f"{repository_url}:{entry['version']}"
    if builder == "buildah":
        with tempfile.TemporaryDirectory() as tmp:
            digestfile = Path(tmp) / "digest"
            buildah.run(
                ["push", "--digestfile", str(digestfile), entry["tags"][0], f"docker://{remote}"],
                capture=False,
            )
            entry["digest"] = digestfile.read_text().strip()
    else:
        client.images.get(entry["tags"][0]).tag(remote)
        for line in client.images.push(remote, stream=True, decode=True):
            if "error" in line:
                raise ContainerError(f"push of {remote} failed: {line['error']}")
        entry["digest"] = client.images.get_registry_data(remote).id
    entry["tags"].append(remote)
    entry["pushed"] = True


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
    parser.add_argument("--only", choices=IMAGES, help="build one image (default: both)")
    parser.add_argument("--push", action="store_true", help="push to the registry of --stack (or --registry)")
    parser.add_argument("--stack", help="stack whose output image_repositories names the registry")
    parser.add_argument("--registry", help="<host>/<path> to push to, instead of the stack output")
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
            f"{image}: {entry['tags'][0]} {entry['digest']} ({entry['size_bytes'] / 1e6:.0f} MB, {entry['build_seconds']} s)"
        )
    print(f"record: {args.record}")
    return 0


def run(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    client = docker_engine() if args.builder in ("auto", "docker") else None
    if args.builder == "docker" and client is None:
        raise ContainerError("no Docker engine answers (DOCKER_HOST / the socket); use --builder buildah")
    builder: Builder = "docker" if client is not None else "buildah"
    if builder == "buildah" and not buildah.available():
        raise ContainerError(
            "neither a Docker engine nor buildah: start Docker, or `apt-get install -y buildah`"
        )
    images = [args.only] if args.only else list(IMAGES)
    base = args.base
    if base == "auto":
        base = "nvidia" if builder == "docker" else "local"
        if base == "local":
            print(
                "containers.build: no Docker engine: building on local base images (containers.localbase)",
                file=sys.stderr,
            )
    version = compute()
    entries: dict[str, dict[str, Any]] = {}
    for image in images:
        base_image = localbase.ensure(image).ref if base == "local" else None
        labels: dict[str, str] = {}
        image_version = version
        spec_args: dict[str, str] = {}
        if image == "serving":
            backend = args.backend or ("python" if base == "local" else "onnxruntime")
            labels = prepare_model_repository(
                bundle=args.bundle,
                model_repository=args.model_repository,
                model_version=args.model_version,
                backend=backend,
            )
            image_version = version.for_model(labels["model_version"])
            spec_args = {
                "MODEL_REPOSITORY": MODEL_REPOSITORY_CONTEXT,
                "MODEL_VERSION": labels["model_version"],
                "DATASET_MANIFEST_SHA256": labels["dataset_manifest_sha256"],
            }
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
        )
        print(
            f"containers.build: {spec.ref} with {builder} on {base_image or 'the pinned NVIDIA base'}",
            file=sys.stderr,
        )
        entries[image] = build_image(spec, builder=builder, client=client)
        if args.push:
            repos = registry_repositories(args.stack, args.registry)
            push(entries[image], repos[image], image_version, builder=builder, client=client)
    write_record(entries, args.record)
    return entries


if __name__ == "__main__":
    raise SystemExit(main())
