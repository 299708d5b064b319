"""Push built images to a stack's registry and confirm what the registry stored.

A pushed image is recorded as `<registry>/<repository>@sha256:<digest>` with the digest the push
returned, and only after a pull by that reference (same engine) and the registry's own manifest
answer both gave that digest. Repository URLs are exactly the stack output `image_repositories`
(or `--registry HOST[/PATH]` + `/<image>`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any, Literal

from containers import docker_engine, registry, registry_api
from containers.errors import ContainerError
from containers.provenance import BUILD_KEY_LABEL
from containers.version import REPO_ROOT, Version

IMAGES = ("training", "serving")
Builder = Literal["docker", "buildah"]


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


def check_target(repository_url: str, version: Version) -> None:
    """Refuse a push target before anything is built: a malformed repository, or a dirty or
    local-base version bound for a registry others pull from (minutes of building for nothing)."""
    loopback = registry.is_loopback(registry.split_repository(repository_url)[0])
    if version.dirty and not loopback:
        raise ContainerError(
            f"refusing to push {version.tag}: it was built from uncommitted changes; commit, then build again"
        )
    if version.local and not loopback:
        raise ContainerError(
            f"refusing to push {version.tag} to {repository_url}: it was built on a local stand-in "
            "base, not the pinned NVIDIA base (build with --base nvidia for a registry others pull from)"
        )


def _registry_tag(repository_url: str, tag: str) -> tuple[str, str] | None:
    """(digest, build key label) of the image the registry already serves under `tag`, None if none."""
    from pipeline import images

    host, path = registry.split_repository(repository_url)
    try:
        digest = images.manifest_digest(host, path, tag)
    except images.RegistryError as exc:
        if exc.status == 404:
            registry_api.absent_reason(host, path, tag)  # raises unless only the tag is missing
            return None
        raise ContainerError(
            f"could not ask {repository_url} whether tag {tag} exists: {exc}"
            + (f". {registry.read_access_hint(host)}" if exc.status in (401, 403) else "")
        ) from None
    try:
        labels = images.resolve(f"{host}/{path}@{digest}")["labels"]
    except images.RegistryError as exc:
        raise ContainerError(
            f"{repository_url}:{tag} names {digest}, but its config could not be read: {exc}"
        ) from None
    return digest, str(labels.get(BUILD_KEY_LABEL, ""))


def _check_tag_free(repository_url: str, tag: str, build_key: str | None) -> tuple[str, str] | None:
    """What the registry holds under `tag`; refused when it was built from other inputs than `build_key`."""
    existing = _registry_tag(repository_url, tag)
    if existing is not None and existing[1] != build_key:
        raise ContainerError(
            f"{repository_url}:{tag} already names {existing[0]}, built from other inputs (build key "
            f"{existing[1][:12] or 'none'} != {str(build_key)[:12]}): tags never move; commit "
            "the change (a new version) or delete that tag from the registry"
        )
    return existing


def check_registry(repository_url: str, tag: str, build_key: str | None = None) -> None:
    """Before anything is built: the address is a registry (`GET /v2/`), it lets this machine read (the
    confirmation after the push reads it the same way), the repository exists or will be created by the push,
    and, given the build key, `tag` does not already name other inputs.

    A registry that is down, a wrong address, a missing ECR/Artifact Registry repository or a refused login
    otherwise surfaces only at the push, after minutes of building (and a refused read, after the push, with no
    record written)."""
    try:
        registry_api.check_api(registry.split_repository(repository_url)[0])
        if build_key is None:
            _registry_tag(repository_url, tag)
        else:
            _check_tag_free(repository_url, tag, build_key)
    except ContainerError as err:
        raise ContainerError(f"{err}. Nothing was built: fix this, then run the build again") from None


def push(
    entry: dict[str, Any], repository_url: str, version: Version, *, builder: Builder, client: Any
) -> None:
    """Push, then confirm: a pull by `<repository>@<digest>` with the same engine and the
    registry's own manifest answer must both give the digest the push returned.

    Tags never move in the registry either: a tag it already holds is reused when that image
    carries this build's key (same inputs; ECR and Artifact Registry, immutable here, refuse a
    second push of a tag even with the same bytes) and refused when it carries another."""
    check_target(repository_url, version)
    tag = entry["version"]
    # Asked again: check_registry ran minutes ago, and another build may have pushed this tag since.
    existing = _check_tag_free(repository_url, tag, entry.get("build_key"))
    if existing is not None:
        digest = existing[0]  # the same inputs are already there: reuse, do not push again
    elif builder == "buildah":
        digest = registry.buildah_push(entry["tags"][0], repository_url, tag)
    else:
        digest = docker_engine.push(client, entry["tags"][0], repository_url, tag)
    ref = registry.reference(repository_url, digest)
    if builder == "buildah":
        pulled = registry.buildah_pull_digest(ref)
    else:
        pulled = docker_engine.pull_digest(client, ref)
    served = registry.manifest_digest(f"{repository_url}:{tag}")
    if not (pulled == served == digest):
        raise ContainerError(
            f"push of {repository_url}:{tag} returned {digest}, a pull got {pulled}, the registry serves {served}"
        )
    entry["local_digest"] = entry["digest"]
    entry["digest"] = digest
    entry["reference"] = ref
    entry["tags"].append(f"{repository_url}:{tag}")
    entry["pushed"] = True
    entry["pull_verified"] = True
    entry["reused_registry_tag"] = existing is not None
