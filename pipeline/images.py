"""The ``images`` step: resolve the CI-built images by digest in the stack's registry, never build in the cluster.

Why not build here: every image this platform deploys is built, pushed, cosign-signed and SLSA-attested by
``.github/workflows/main.yml`` on main, and every deploy verifies that signature identity first (main.yml
``promote-dev``, promote.yml). An image built inside the cluster could carry neither, so no deploy would accept
it; the cluster would need a builder, registry push rights and the repository's ``containers/`` package for
nothing. This step therefore checks what CI published, over the OCI distribution API (plain HTTPS, what the
pinned training image already has):

- both references are pinned by digest (``REPO@sha256:...``), the registry serves those exact bytes (each
  manifest and config blob is hashed and compared with its digest), and
- the serving image's ``eu.ml-platform.bundle.metadata-sha256`` label names the candidate's export bundle.

Then it writes a build record in ``containers.build``'s format (what promotion's ``images-pinned`` and
``image-carries-bundle`` gates read) and its flag is true. If the serving image was built from another bundle,
the flag is false and the decision says CI must build the serving image for this bundle: promotion is skipped,
not failed. A registry that cannot be reached or refuses the credentials fails the step (exit 1, the reason).

Credentials (pipeline/registry_auth.py), looked up when the registry answers 401: the ``$DOCKER_CONFIG`` entry for
the host, else the pod's cloud identity by the registry's host (ECR, Artifact Registry, ACR), else anonymous;
used as Basic auth or to fetch a Bearer token from the registry's ``WWW-Authenticate`` realm (the distribution
token flow). Loopback registries are reached over HTTP, every other one over verified TLS.

``manifest_digest`` is also the check after ``python -m containers.build --push`` (containers/registry.py):
one client, so the push check opens ECR, Artifact Registry and ACR exactly as this step does.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from email.message import Message
from pathlib import Path
from typing import Any

from pipeline import registry_auth
from pipeline.registry_auth import RegistryError

__all__ = [
    "BUNDLE_LABEL",
    "RegistryError",
    "bundle_sha256",
    "check",
    "manifest_digest",
    "parse",
    "read",
    "resolve",
]

BUNDLE_LABEL = "eu.ml-platform.bundle.metadata-sha256"  # containers/serving/Dockerfile, promotion/sequence.py
REFERENCE = re.compile(
    r"(?P<host>[a-zA-Z0-9.-]+(?::\d+)?)/(?P<repo>[a-z0-9]+(?:[._/-][a-z0-9]+)*)(?::[\w.-]+)?@(?P<digest>sha256:[0-9a-f]{64})"
)
MANIFESTS = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
PLATFORM = {"os": "linux", "architecture": "amd64"}  # the clusters' node pools
TIMEOUT_S = 30
RETRIES = 3
RETRY_PAUSE_S = 1.0
RETRY_MAX_PAUSE_S = 10.0
TRANSIENT = frozenset({429, 500, 502, 503, 504})


def parse(reference: str) -> tuple[str, str, str]:
    """(host, repository, digest); a reference without a digest is a usage error (ValueError)."""
    match = REFERENCE.fullmatch(reference.strip())
    if match is None:
        raise ValueError(
            f"{reference!r} is not pinned by digest: give REGISTRY/REPOSITORY@sha256:<64 hex> (stack outputs "
            "training_image and serving_image), never a tag"
        )
    return match["host"], match["repo"], match["digest"]


class _RedirectHandler(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but send the registry's Authorization only to the registry's own host.

    ECR, Artifact Registry and ACR answer blob reads with a redirect to signed storage URLs (S3, GCS, Azure
    Blob); urllib would forward the Authorization header there, and S3 refuses a request carrying two auth
    mechanisms. Docker's client drops it the same way."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if (
            new is not None
            and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc
        ):
            new.remove_header("Authorization")
        return new


_OPENER = urllib.request.build_opener(_RedirectHandler)


def _bearer(url: str, challenge: str, credential: registry_auth.Credential | None) -> str:
    """A token from the challenge's realm (the distribution token flow), with Basic auth when we have any."""
    fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    if "realm" not in fields:
        raise RegistryError(f"{url}: unsupported authentication challenge {challenge!r}")
    query = urllib.parse.urlencode({k: v for k, v in fields.items() if k in ("service", "scope")})
    req = urllib.request.Request(f"{fields['realm']}?{query}")
    if credential:
        req.add_header("Authorization", f"Basic {credential.basic}")
    try:
        with _OPENER.open(req, timeout=TIMEOUT_S) as resp:
            doc = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise RegistryError(_refused(url, exc.code, credential, fields["realm"])) from None
    except urllib.error.URLError as exc:
        raise RegistryError(f"{fields['realm']}: {exc.reason}") from None
    return str(doc.get("token") or doc["access_token"])


def _refused(url: str, code: int, credential: registry_auth.Credential | None, where: str = "") -> str:
    host = urllib.parse.urlsplit(url).netloc
    at = f" (token endpoint {where})" if where else ""
    if credential is None:
        return f"{url}: HTTP {code}{at}: {registry_auth.missing(host)}"
    return f"{url}: HTTP {code}{at}: the registry refused {credential.source}; it needs {credential.need}"


def _get(host: str, path: str, accept: str, auth: registry_auth.Credentials) -> tuple[bytes, Message]:
    """GET <registry>/v2/path, answering one auth challenge: the body and the response headers.

    A registry's passing trouble (429, 500, 502, 503, 504 or a read that timed out: a rolling restart, a
    throttled burst of pods) is retried, RETRIES times in all with a growing pause (Retry-After when it says,
    at most RETRY_MAX_PAUSE_S); a refusal or a missing image is not."""
    for attempt in range(1, RETRIES + 1):
        try:
            return _get_once(host, path, accept, auth)
        except _Transient as exc:
            if attempt == RETRIES:
                raise RegistryError(f"{exc} ({RETRIES} tries)", exc.status) from None
            time.sleep(min(exc.retry_after or RETRY_PAUSE_S * 2 ** (attempt - 1), RETRY_MAX_PAUSE_S))
    raise AssertionError("unreachable: the last attempt returns or raises")


class _Transient(RegistryError):
    def __init__(self, message: str, status: int | None, retry_after: float | None = None) -> None:
        super().__init__(message, status)
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:  # an HTTP date: wait as if unsaid
        return None


def _get_once(host: str, path: str, accept: str, auth: registry_auth.Credentials) -> tuple[bytes, Message]:
    url = f"{registry_auth.base_url(host)}/v2/{path}"
    headers = {"Accept": accept}
    credential: registry_auth.Credential | None = None
    for attempt in range(2):
        try:
            with _OPENER.open(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S) as resp:
                return resp.read(), resp.headers
        except urllib.error.HTTPError as exc:
            challenge = exc.headers.get("WWW-Authenticate", "")
            if exc.code in TRANSIENT:
                raise _Transient(
                    f"{url}: HTTP {exc.code} {exc.reason}",
                    exc.code,
                    _retry_after(exc.headers.get("Retry-After")),
                ) from None
            if exc.code != 401 or attempt == 1:
                if exc.code in (401, 403):
                    raise RegistryError(_refused(url, exc.code, credential), exc.code) from None
                raise RegistryError(f"{url}: HTTP {exc.code} {exc.reason}", exc.code, _errors(exc)) from None
            credential = auth.get(host)
            if challenge.lower().startswith("bearer"):
                headers["Authorization"] = f"Bearer {_bearer(url, challenge, credential)}"
            elif credential is not None:
                headers["Authorization"] = f"Basic {credential.basic}"
            else:
                raise RegistryError(_refused(url, exc.code, None), exc.code) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise _Transient(f"{url}: {exc.reason}", None) from None
            raise RegistryError(f"{url}: {exc.reason}") from None
        except TimeoutError as exc:  # the response's read, after the connection was made
            raise _Transient(f"{url}: read timed out ({exc})", None) from None
    raise AssertionError("unreachable: the second attempt returns or raises")


def _errors(exc: urllib.error.HTTPError) -> list[dict[str, str]]:
    """The Distribution spec's error list in an error answer's body; the spec lets a 404 come without one."""
    try:
        errors = json.loads(exc.read() or b"{}").get("errors") or []
    except (ValueError, AttributeError, OSError):
        return []
    return [
        {"code": str(e.get("code", "")).upper(), "message": str(e.get("message", ""))}
        for e in errors
        if isinstance(e, dict)
    ]


def read(host: str, path: str, accept: str = MANIFESTS) -> bytes:
    """GET <registry>/v2/path with this module's one client (auth challenge, retries, redirects); a refusal or a
    missing object raises RegistryError with the status and, for a 404, the spec's error codes."""
    return _get(host, path, accept, registry_auth.Credentials())[0]


def _fetch(
    host: str, path: str, accept: str, digest: str, auth: registry_auth.Credentials
) -> tuple[bytes, str]:
    """GET <registry>/v2/path, answering one auth challenge; the body must hash to ``digest``."""
    body, headers = _get(host, path, accept, auth)
    served = "sha256:" + hashlib.sha256(body).hexdigest()
    if served != digest:
        raise RegistryError(
            f"{registry_auth.base_url(host)}/v2/{path}: served bytes hashing to {served}, not {digest}"
        )
    return body, headers.get("Content-Type", "")


def manifest_digest(
    host: str, repo: str, reference: str, auth: registry_auth.Credentials | None = None
) -> str:
    """The digest of the manifest the registry serves for ``reference`` (a tag or a digest): what a pull gets.

    A GET, not a HEAD: the registry's ``Docker-Content-Digest`` is only believed when it is the sha256 of the
    bytes it sent (a registry that omits the header is answered by the hash alone)."""
    body, headers = _get(
        host, f"{repo}/manifests/{reference}", MANIFESTS, auth or registry_auth.Credentials()
    )
    served = "sha256:" + hashlib.sha256(body).hexdigest()
    claimed = headers.get("Docker-Content-Digest") or served
    url = f"{registry_auth.base_url(host)}/v2/{repo}/manifests/{reference}"
    if claimed != served:
        raise RegistryError(f"{url}: the registry names digest {claimed} for a manifest hashing to {served}")
    if reference.startswith("sha256:") and reference != served:
        raise RegistryError(f"{url}: served bytes hashing to {served}, not {reference}")
    return served


def resolve(reference: str, auth: registry_auth.Credentials | None = None) -> dict[str, Any]:
    """The image's manifest digest (the reference's), config digest and labels, each checked by its hash."""
    host, repo, digest = parse(reference)
    auth = auth or registry_auth.Credentials()
    body, _ = _fetch(host, f"{repo}/manifests/{digest}", MANIFESTS, digest, auth)
    manifest = json.loads(body)
    if "manifests" in manifest:  # an index: the node pools' platform
        chosen = [
            m
            for m in manifest["manifests"]
            if all((m.get("platform") or {}).get(k) == v for k, v in PLATFORM.items())
        ]
        if not chosen:
            raise RegistryError(
                f"{reference}: the index has no {PLATFORM['os']}/{PLATFORM['architecture']} image"
            )
        body, _ = _fetch(
            host, f"{repo}/manifests/{chosen[0]['digest']}", MANIFESTS, chosen[0]["digest"], auth
        )
        manifest = json.loads(body)
    config_digest = manifest["config"]["digest"]
    config, _ = _fetch(host, f"{repo}/blobs/{config_digest}", "*/*", config_digest, auth)
    labels = (json.loads(config).get("config") or {}).get("Labels") or {}
    return {
        "reference": f"{host}/{repo}@{digest}",
        "digest": digest,
        "config_digest": config_digest,
        "labels": labels,
        "pushed": True,
        "pull_verified": True,
    }


def bundle_sha256(bundle: Path) -> str:
    """sha256 of the bundle's metadata.json bytes (containers/build.py's label, promotion's comparison)."""
    return hashlib.sha256((bundle / "metadata.json").read_bytes()).hexdigest()


def check(
    training_image: str, serving_image: str, bundle: Path
) -> tuple[bool, dict[str, Any], dict[str, Any]]:
    """(ready, decision, build record); raises ValueError for an unpinned reference, RegistryError."""
    want = bundle_sha256(bundle)
    auth = registry_auth.Credentials()
    training, serving = resolve(training_image, auth), resolve(serving_image, auth)
    label = serving["labels"].get(BUNDLE_LABEL)
    ready = label == want
    reason = (
        f"the serving image {serving['reference']} was built from this bundle ({want[:12]}); both images served "
        "by digest"
        if ready
        else f"the serving image {serving['reference']} carries bundle {str(label)[:12]}, the candidate is "
        f"{want[:12]}: CI (.github/workflows/main.yml) must build, sign and push the serving image for this "
        "bundle; promotion skipped"
    )
    decision = {
        "ready": ready,
        "reasons": [reason],
        "bundle_metadata_sha256": want,
        "training_image": training["reference"],
        "serving_image": serving["reference"],
        "serving_bundle_label": label,
    }
    return ready, decision, {"images": {"training": training, "serving": serving}}
