"""What a registry answers before anything is built: that the address is a registry at all, and, when a tag is
not there, whether only the tag is missing or the whole repository (which some registries never create on push).

pipeline/images.py reads manifests for the push check and the `images` step; a 404's RegistryError carries the
Distribution spec's error codes (MANIFEST_UNKNOWN vs NAME_UNKNOWN), which `absent_reason` reads (and, where it
matters, the tags list's) through that same client.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from containers.errors import ContainerError

# Registries that do not create a repository on the first push (NAME_UNKNOWN there means the push will fail):
# ECR needs `aws ecr create-repository`; Artifact Registry creates images on push, but not the repository that
# holds them. The platform's stacks create both (infra/aws/registry.py, infra/gcp/registry.py). ACR and the
# distribution registry create repositories on push.
_NO_CREATE_ON_PUSH = {
    "ecr": "ECR does not create repositories on push; infra/aws/registry.py creates <stack name>/training and "
    "<stack name>/serving",
    "gar": "Artifact Registry creates images on push, but not the repository holding them; infra/gcp/registry.py "
    "creates <stack name>-training and <stack name>-serving",
}


def check_api(host: str) -> None:
    """`GET /v2/`: a registry answers 200, or 401 with a WWW-Authenticate challenge (Distribution spec, "API
    version check"). Anything else is not a registry: without this, a wrong address whose server answers 404
    to everything passed the tag check as "tag absent", and the push failed after minutes of building."""
    from pipeline import images, registry_auth

    url = f"{registry_auth.base_url(host)}/v2/"
    try:
        with urllib.request.urlopen(url, timeout=images.TIMEOUT_S):
            return
    except urllib.error.HTTPError as exc:
        if exc.code == 401 and exc.headers.get("WWW-Authenticate"):
            return
        if exc.code in images.TRANSIENT:
            raise ContainerError(
                f"{url}: HTTP {exc.code} {exc.reason}: the registry is not serving now; try again later"
            ) from None
        raise ContainerError(
            f"{url} answered HTTP {exc.code} {exc.reason}: {host} is not a container registry (a registry "
            "answers GET /v2/ with 200, or 401 and a WWW-Authenticate challenge); check the address given "
            "to --registry (HOST[:PORT][/PATH]) or the stack output image_repositories"
        ) from None
    except urllib.error.URLError as exc:
        raise ContainerError(f"{url}: {exc.reason}") from None
    except TimeoutError as exc:
        raise ContainerError(f"{url}: no answer ({exc})") from None


def _not_found(host: str, path: str) -> list[dict[str, str]] | None:
    """None when `GET /v2/<path>` answers; after a 404, the Distribution spec's error list (empty when the body has
    none). Read with pipeline/images.py's client, so the auth challenge is answered exactly as the tag check's."""
    from pipeline import images, registry_auth

    try:
        images.read(host, path, images.MANIFESTS + ", application/json")
    except registry_auth.RegistryError as exc:
        if exc.status != 404:
            raise ContainerError(str(exc)) from None
        return exc.errors
    return None


def _names_the_repository(cloud: str, path: str, errors: list[dict[str, str]]) -> bool:
    if cloud != "gar":
        return True
    # Artifact Registry: `<project>/<repository>/<image>`; the image appears with its first push, so only a
    # NAME_UNKNOWN naming the repository (`Repository "<id>" not found`) means the push will fail.
    parts = path.split("/")
    return len(parts) > 1 and any(f'"{parts[1]}"' in e["message"] for e in errors)


def absent_reason(host: str, path: str, tag: str) -> None:
    """After a 404 for `path:tag`: return when only the tag is missing (the push creates it); raise when the
    repository is missing on a registry that will not create it, or the 404 is not the spec's "not there"."""
    from pipeline import registry_auth

    errors = _not_found(host, f"{path}/manifests/{tag}") or []
    unexpected = {e["code"] for e in errors} - {"MANIFEST_UNKNOWN", "NAME_UNKNOWN", ""}
    if unexpected:
        raise ContainerError(
            f"{host}/{path}:{tag}: the registry answered 404 with {', '.join(sorted(unexpected))}, not the "
            "Distribution spec's MANIFEST_UNKNOWN or NAME_UNKNOWN: check the repository path"
        )
    try:
        cloud = registry_auth.provider(host)
    except ValueError as exc:
        raise ContainerError(str(exc)) from None
    if cloud not in _NO_CREATE_ON_PUSH:
        return  # the tag, or the whole repository, appears with the first push
    # Registries differ in the code a manifest read of a missing repository gets (distribution: MANIFEST_UNKNOWN,
    # ECR: NAME_UNKNOWN); the tags list answers NAME_UNKNOWN for it (Distribution spec, "Listing Tags").
    if not any(e["code"] == "NAME_UNKNOWN" for e in errors):
        errors = _not_found(host, f"{path}/tags/list") or []
    missing = [e for e in errors if e["code"] == "NAME_UNKNOWN"]
    if missing and _names_the_repository(cloud, path, missing):
        raise ContainerError(
            f"the repository {host}/{path} does not exist (the registry answered NAME_UNKNOWN: "
            f"{missing[0]['message'] or 'no message'}): {_NO_CREATE_ON_PUSH[cloud]}; run `pulumi up` for the "
            "stack, or check --registry / the stack output image_repositories"
        )
