"""Registry credentials for the ``images`` step: the Docker config first, then the pod's own cloud identity.

Order, per registry host (the first that applies wins):

1. ``$DOCKER_CONFIG/config.json`` (default ``~/.docker``), read as the Docker CLI reads it: a credential
   helper (``credHelpers.<host>``, else ``credsStore``) run as ``docker-credential-<name> get`` with the host
   on stdin (the docker-credential-helpers protocol), then ``auths.<host>.auth`` (user:password). An explicit
   override (e.g. the optional ``registry-credentials`` Secret of pipeline/argo.py, or a laptop's ``docker
   login`` / ``gcloud auth configure-docker``), never needed on the platform's own registries.
2. The host is a cloud registry: credentials derived from the identity the pod runs as (the ``trainer``
   service account's IRSA/Pod Identity, GKE Workload Identity or Azure workload identity; infra gives it
   read on exactly the two image repositories, ``infra.shape.IMAGE_PULL``). Minted at each run, so nothing
   goes stale (an ECR token lives 12 h, a static Secret would expire):

   - ``<account>.dkr.ecr.<region>.amazonaws.com``: ``ecr:GetAuthorizationToken`` (boto3) returns the Basic
     ``AWS:<password>`` pair directly;
   - ``<location>-docker.pkg.dev``: an OAuth2 access token of ``google.auth.default()`` (cloud-platform scope)
     as the password of user ``oauth2accesstoken``;
   - ``<name>.azurecr.io``: an Entra ID token (``DefaultAzureCredential``, scope
     ``https://management.azure.com/.default``) exchanged at ``https://<name>.azurecr.io/oauth2/exchange``
     (form ``grant_type=access_token, service=<host>, access_token=...``) for an ACR refresh token, the
     password of user ``00000000-0000-0000-0000-000000000000``.

   ``PIPELINE_REGISTRY_AUTH=ecr|gar|acr`` names the cloud for a host the patterns above do not match (a
   registry behind its own domain; the tests' loopback registry), ``none`` turns step 2 off.
3. Nothing: anonymous (a registry that serves anonymously, and the tests' loopback registries, work as
   before).

Credentials are only looked up once the registry asks (HTTP 401), once per host and run. The cloud SDKs are
imported lazily (all three are in the training image: containers/training/requirements.txt).
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

PROVIDER_ENV = "PIPELINE_REGISTRY_AUTH"
PROVIDERS = ("ecr", "gar", "acr", "none")
ECR_HOST = re.compile(
    r"(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?(?::443)?"
)
GAR_HOST = re.compile(r"[a-z0-9-]+-docker\.pkg\.dev(?::443)?")
ACR_HOST = re.compile(r"[a-z0-9]+\.azurecr\.io(?::443)?")
GCP_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
AZURE_SCOPE = "https://management.azure.com/.default"  # what ACR's /oauth2/exchange accepts (public cloud)
GAR_USER = "oauth2accesstoken"
ACR_USER = "00000000-0000-0000-0000-000000000000"  # ACR's user name for a refresh token
TIMEOUT_S = 30
# What each cloud's identity needs to read an image, for the refusal messages (infra.shape.IMAGE_PULL).
PULL_NEEDS = {
    "ecr": "ecr:BatchGetImage and ecr:GetDownloadUrlForLayer on the repository (infra/aws/documents.py "
    "ecr_pull_statements)",
    "gar": "roles/artifactregistry.reader on the repository (infra/gcp/roles.py)",
    "acr": "AcrPull on the registry (infra/azure/roles.py)",
}


class RegistryError(Exception):
    """The registry could not confirm an image: unreachable, refused, no usable identity, or other bytes.

    ``status``: the registry's HTTP status when it answered with one (404: no such tag or repository).
    ``errors``: the Distribution spec's error list from the answer's body (``{"code", "message"}``, code in upper
    case): MANIFEST_UNKNOWN (only the tag is missing) vs NAME_UNKNOWN (the whole repository) after a 404."""

    def __init__(
        self, message: str, status: int | None = None, errors: list[dict[str, str]] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.errors = errors or []


@dataclasses.dataclass(frozen=True, slots=True)
class Credential:
    basic: str
    """base64 of ``user:password``: Basic auth, or the Basic auth of the registry's token endpoint."""
    source: str
    """Where it came from, for messages."""
    need: str
    """What the identity must be granted to read, for a refusal message."""


def loopback(host: str) -> bool:
    """``host[:port]`` is this machine's loopback interface (plain HTTP there); containers/registry.py pushes
    by this rule too, so the push and the check that reads it back agree."""
    if host.startswith("["):
        name = host[1 : host.index("]")]
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def base_url(host: str) -> str:
    """Loopback registries (tests) over HTTP, every other one over verified TLS."""
    return f"{'http' if loopback(host) else 'https'}://{host}"


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


HELPER_NOT_FOUND = "credentials not found"  # what every docker-credential-* helper prints for an unknown host
TOKEN_USER = "<token>"  # a helper's user name for an OAuth2 identity (refresh) token, not a password


def credential_helper(name: str, host: str, path: Path) -> Credential | None:
    """``docker-credential-<name> get`` with ``host`` on stdin: the helper's Username and Secret, or None when
    it holds nothing for ``host`` (the Docker CLI's own lookup, docker/docker-credential-helpers protocol)."""
    exe = f"docker-credential-{name}"
    if shutil.which(exe) is None:
        raise RegistryError(
            f"{path} names the credential helper {name!r} for {host}, and {exe} is not on PATH: install it "
            "(e.g. the cloud's CLI), or remove credsStore/credHelpers from that file, or point DOCKER_CONFIG "
            "at another folder"
        )
    try:
        done = subprocess.run(
            [exe, "get"], input=host, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise RegistryError(f"{exe} get {host}: no answer within {TIMEOUT_S} s") from None
    if done.returncode != 0:
        if HELPER_NOT_FOUND in f"{done.stdout} {done.stderr}".lower():
            return None
        said = (done.stdout.strip() or done.stderr.strip()).splitlines()
        raise RegistryError(
            f"{exe} get {host} failed (exit {done.returncode}): {said[-1] if said else 'no output'}: fix the "
            f"helper's login (e.g. its CLI's auth), or remove it from {path}"
        )
    try:
        answer = json.loads(done.stdout)
        user, secret = str(answer["Username"]), str(answer["Secret"])
    except (ValueError, KeyError, TypeError):
        raise RegistryError(
            f"{exe} get {host} printed no {{Username, Secret}} JSON: {done.stdout[:200]!r}"
        ) from None
    if user == TOKEN_USER:
        raise RegistryError(
            f"{exe} holds an identity token for {host} (user {TOKEN_USER}), which this step does not exchange: "
            "log in with a user and password or access token (docker login -u ...), or rely on the pod's cloud "
            f"identity ({PROVIDER_ENV})"
        )
    return Credential(
        _basic(user, secret), f"the credential helper {exe} ({path})", "a user that may pull the images"
    )


def docker_config(host: str) -> Credential | None:
    """The Docker CLI's lookup: ``credHelpers.<host>``, else ``credsStore``, else ``auths.<host>.auth``."""
    folder = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
    path = Path(folder) / "config.json"
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        auths, helpers = config.get("auths") or {}, config.get("credHelpers") or {}
        store = config.get("credsStore") or ""
        entry = auths.get(host) or auths.get(f"https://{host}") or {}
    except (ValueError, AttributeError) as exc:
        raise ValueError(
            f"{path} is not a Docker config.json ({exc}): fix it or unset DOCKER_CONFIG"
        ) from None
    helper = helpers.get(host) or store
    if helper:
        found = credential_helper(str(helper), host, path)
        # A helper that knows nothing of the host leaves the file's own entry, then the pod's identity.
        if found is not None:
            return found
    if not entry.get("auth"):
        return None
    return Credential(
        entry["auth"], f"the DOCKER_CONFIG entry for {host} ({path})", "a user that may pull the images"
    )


def provider(host: str) -> str | None:
    """The cloud whose identity opens ``host``: PIPELINE_REGISTRY_AUTH, else the host's pattern, else None."""
    chosen = os.environ.get(PROVIDER_ENV, "").strip().lower()
    if chosen:
        if chosen not in PROVIDERS:
            raise ValueError(
                f"{PROVIDER_ENV}={chosen!r}: use one of {', '.join(PROVIDERS)} (or leave it unset)"
            )
        return None if chosen == "none" else chosen
    for name, pattern in (("ecr", ECR_HOST), ("gar", GAR_HOST), ("acr", ACR_HOST)):
        if pattern.fullmatch(host):
            return name
    return None


def ecr(host: str) -> Credential:
    """ECR's Basic pair from ecr:GetAuthorizationToken in the host's region (else boto3's default region)."""
    import boto3
    import botocore.exceptions

    match = ECR_HOST.fullmatch(host)
    region = match["region"] if match else None
    try:
        data = boto3.client("ecr", region_name=region).get_authorization_token()["authorizationData"][0]
    except botocore.exceptions.NoCredentialsError:
        raise RegistryError(
            f"{host}: no AWS identity in this pod to call ecr:GetAuthorizationToken: run as the `trainer` "
            "service account (EKS Pod Identity, infra/aws/identity.py) or give a DOCKER_CONFIG entry"
        ) from None
    except botocore.exceptions.ClientError as exc:
        error = exc.response.get("Error", {})
        raise RegistryError(
            f"{host}: the pod's AWS identity may not call ecr:GetAuthorizationToken ({error.get('Code')}: "
            f"{error.get('Message')}): grant it infra.shape.IMAGE_PULL (infra/aws/documents.py "
            "ecr_pull_statements)"
        ) from None
    except botocore.exceptions.BotoCoreError as exc:
        raise RegistryError(f"{host}: ecr:GetAuthorizationToken failed: {exc}") from None
    return Credential(
        data["authorizationToken"], "the pod's AWS identity (ecr:GetAuthorizationToken)", PULL_NEEDS["ecr"]
    )


def gar(host: str) -> Credential:
    """An OAuth2 access token of the pod's Google identity, as Artifact Registry's ``oauth2accesstoken``."""
    import google.auth
    import google.auth.exceptions

    try:
        credentials, _ = google.auth.default(scopes=[GCP_SCOPE])
        if not credentials.valid:
            import google.auth.transport.requests

            credentials.refresh(google.auth.transport.requests.Request())
    except google.auth.exceptions.DefaultCredentialsError as exc:
        raise RegistryError(
            f"{host}: no Google identity in this pod ({exc}): run as the `trainer` service account (GKE "
            "Workload Identity, infra/gcp/identity.py) or give a DOCKER_CONFIG entry"
        ) from None
    except google.auth.exceptions.GoogleAuthError as exc:
        raise RegistryError(
            f"{host}: the pod's Google identity could not mint an access token: {exc}"
        ) from None
    if not credentials.token:
        raise RegistryError(f"{host}: the pod's Google identity gave no access token")
    return Credential(
        _basic(GAR_USER, str(credentials.token)),
        "the pod's Google identity (OAuth2 access token)",
        PULL_NEEDS["gar"],
    )


def acr_refresh_token(host: str, aad_token: str) -> str:
    """Exchange an Entra ID access token for an ACR refresh token (ACR's ``POST /oauth2/exchange``)."""
    form = {"grant_type": "access_token", "service": host.split(":")[0], "access_token": aad_token}
    req = urllib.request.Request(
        f"{base_url(host)}/oauth2/exchange",
        data=urllib.parse.urlencode(form).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310 (https or loopback)
            return str(json.loads(resp.read())["refresh_token"])
    except urllib.error.HTTPError as exc:
        raise RegistryError(
            f"{host}/oauth2/exchange refused the pod's Entra ID token (HTTP {exc.code}): the identity needs "
            f"{PULL_NEEDS['acr']}"
        ) from None
    except (urllib.error.URLError, KeyError, ValueError) as exc:
        raise RegistryError(f"{host}/oauth2/exchange gave no refresh token: {exc}") from None


def acr(host: str) -> Credential:
    """The pod's Entra ID token, exchanged for an ACR refresh token (user 00000000-...)."""
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity import DefaultAzureCredential

    try:
        credential = DefaultAzureCredential()
        try:
            token = credential.get_token(AZURE_SCOPE).token
        finally:
            credential.close()
    except ClientAuthenticationError as exc:
        raise RegistryError(
            f"{host}: no Entra ID identity in this pod ({str(exc).splitlines()[0]}): run as the `trainer` "
            "service account (Azure workload identity, infra/azure/identity.py) or give a DOCKER_CONFIG entry"
        ) from None
    return Credential(
        _basic(ACR_USER, acr_refresh_token(host, token)),
        "the pod's Entra ID identity (ACR refresh token)",
        PULL_NEEDS["acr"],
    )


IDENTITIES = {"ecr": ecr, "gar": gar, "acr": acr}


class Credentials:
    """Credentials per host for one run of the step, looked up on the first challenge and kept."""

    def __init__(self) -> None:
        self._known: dict[str, Credential | None] = {}

    def get(self, host: str) -> Credential | None:
        if host not in self._known:
            found = docker_config(host)
            if found is None:
                cloud = provider(host)
                found = IDENTITIES[cloud](host) if cloud else None
            self._known[host] = found
        return self._known[host]


def missing(host: str) -> str:
    """Why no credential was offered to a registry that asked for one."""
    return (
        f"{host} asks for credentials and none apply: no DOCKER_CONFIG entry for it, and it is not a cloud "
        f"registry (ECR, Artifact Registry, ACR host names; {PROVIDER_ENV}=ecr|gar|acr names the cloud of "
        "another host)"
    )
