"""Registry references and transport rules shared by both engines.

- A reference the platform deploys is `<registry>/<repository>@sha256:<digest>`: the digest the
  registry returned on push, never a local id (a local manifest's digest changes when layers are
  compressed for the push).
- A registry on the loopback interface (127.0.0.1, ::1, localhost) is reached over plain HTTP;
  every other registry only over TLS with verified certificates. There is no switch to relax it.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from containers import buildah
from containers.errors import ContainerError

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# distribution's reference grammar, reduced: host[:port] then lowercase path components.
_REPOSITORY = re.compile(
    r"(?P<host>[a-zA-Z0-9.-]+(?::\d+)?|\[[0-9a-fA-F:]+\](?::\d+)?)(?P<path>(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)+)"
)


def split_repository(repository: str) -> tuple[str, str]:
    """(registry host[:port], path) of a repository URL such as `127.0.0.1:5000/eu/serving`."""
    if "://" in repository:
        raise ContainerError(
            f"{repository!r}: give the registry as host[:port]/path, without a scheme "
            "(loopback registries are reached over HTTP, all others over TLS)"
        )
    match = _REPOSITORY.fullmatch(repository)
    if match is None:
        raise ContainerError(f"{repository!r} is not a registry repository (host[:port]/lowercase/path)")
    return match["host"], match["path"].lstrip("/")


def is_loopback(host: str) -> bool:
    # One rule for the push (plain HTTP to loopback) and for the check that reads it back (pipeline's client).
    from pipeline.registry_auth import loopback

    return loopback(host)


def tls_verify(repository: str) -> bool:
    """Plain HTTP only for a registry on this machine's loopback interface."""
    return not is_loopback(split_repository(repository)[0])


def reference(repository: str, digest: str) -> str:
    if not DIGEST.fullmatch(digest):
        raise ContainerError(f"{digest!r} is not a sha256 digest")
    split_repository(repository)
    return f"{repository}@{digest}"


def buildah_push(local_ref: str, repository: str, tag: str) -> str:
    """Push with buildah; return the digest of the manifest the registry stored."""
    with tempfile.TemporaryDirectory(prefix="push-") as tmp:
        digestfile = Path(tmp) / "digest"
        buildah.run(
            [
                "push",
                f"--tls-verify={str(tls_verify(repository)).lower()}",
                "--digestfile",
                str(digestfile),
                local_ref,
                f"docker://{repository}:{tag}",
            ],
            capture=False,
        )
        digest = digestfile.read_text().strip()
    if not DIGEST.fullmatch(digest):
        raise ContainerError(f"buildah push of {repository}:{tag} returned no digest ({digest!r})")
    return digest


def buildah_pull_digest(ref: str) -> str:
    """Pull `<repo>@sha256:...` with buildah and return the digest of what arrived."""
    repository = ref.partition("@")[0]
    buildah.run(["pull", "--quiet", f"--tls-verify={str(tls_verify(repository)).lower()}", f"docker://{ref}"])
    return buildah.image_digest(ref)


def manifest_digest(ref: str) -> str:
    """Ask the registry itself (Registry HTTP API v2) which digest it serves for `ref` (`repo:tag` or
    `repo@digest`): an engine-independent check of what a pull would get.

    Cloud registries refuse anonymous reads, so this goes through the pipeline's registry client
    (pipeline/images.py: one auth challenge answered with Basic or a Bearer token, credentials from
    $DOCKER_CONFIG or the machine's cloud identity), the one the `images` step reads these images
    with. pipeline never imports containers, and both run from the repository root with the
    project virtualenv, so this direction adds no cycle and no dependency."""
    from pipeline import images

    if "@" in ref:
        repository, _, what = ref.partition("@")
    else:
        repository, _, what = ref.rpartition(":")
    host, path = split_repository(repository)
    try:
        return images.manifest_digest(host, path, what)
    except (images.RegistryError, ValueError) as exc:
        # The engine pushed with its own login; this check reads only what registry_auth reads.
        raise ContainerError(
            f"{ref} was pushed, but the registry's manifest answer could not confirm its digest: {exc}. "
            + read_access_hint(host)
        ) from None


def read_access_hint(host: str) -> str:
    """Where the checks that read a registry (before the build, after the push) take credentials from."""
    return (
        f"Give this check read access to {host}: `docker login {host}` (a $DOCKER_CONFIG/config.json "
        "entry or credential helper; buildah's own auth.json is not read), or run where the cloud "
        "identity opens it (ECR, Artifact Registry, ACR; PIPELINE_REGISTRY_AUTH=ecr|gar|acr for "
        "another host name)"
    )
