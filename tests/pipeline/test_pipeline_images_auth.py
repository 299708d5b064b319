"""The `images` step's registry credentials (pipeline/registry_auth.py) against real servers.

A real `docker-registry` on 127.0.0.1 with htpasswd Basic auth (tests/pipeline/conftest.py) refuses anonymous
reads. Its users are the pairs each cloud identity yields: `AWS` with the password moto's ECR
`GetAuthorizationToken` hands out (moto's server over HTTP, reached through boto3's own `AWS_ENDPOINT_URL_ECR`),
`oauth2accesstoken` with a Google access token.
The registry is on loopback, so `PIPELINE_REGISTRY_AUTH` names the cloud (the documented seam; real hosts are
mapped by name, tested on the host patterns). Azure: the Entra ID token is a fixed one (no fake token endpoint),
and the exchange request is checked on a loopback HTTP server that answers like ACR's `/oauth2/exchange`.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline import images, registry_auth
from tests.httpd import http_server
from tests.pipeline.conftest import GOOGLE_TOKEN, REGION
from tests.pipeline.test_pipeline_images import candidate, step

pytestmark = pytest.mark.integration


@pytest.fixture
def aws_identity(monkeypatch: pytest.MonkeyPatch, s3_server: str, no_docker_config: None) -> None:
    """The pod's AWS identity, answered by moto's server (boto3 honours AWS_ENDPOINT_URL_ECR itself)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_ECR", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


def test_the_ecr_identity_opens_a_registry_that_refuses_anonymous_reads(
    registry: dict[str, Any],
    aws_identity: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    work, sha = candidate(tmp_path)
    serving = f"{registry['address']}/mlp/serving@" + registry["push"]({images.BUNDLE_LABEL: sha}, "ecr")
    # Without the identity path (a loopback host maps to no cloud): anonymous, refused, and it says why.
    assert step(work, registry["training"], serving) == (1, "")
    assert "asks for credentials and none apply" in capsys.readouterr().err
    monkeypatch.setenv(registry_auth.PROVIDER_ENV, "ecr")
    assert step(work, registry["training"], serving) == (0, "true")
    record = json.loads((work / "candidate" / "build-record.json").read_text())
    assert record["images"]["serving"]["labels"][images.BUNDLE_LABEL] == sha


def test_a_docker_config_entry_comes_before_the_identity(
    registry: dict[str, Any], aws_identity: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "docker"
    config.mkdir()
    wrong = base64.b64encode(b"AWS:stale-token").decode()
    (config / "config.json").write_text(json.dumps({"auths": {registry["address"]: {"auth": wrong}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    monkeypatch.setenv(registry_auth.PROVIDER_ENV, "ecr")
    with pytest.raises(registry_auth.RegistryError, match="refused the DOCKER_CONFIG entry"):
        images.resolve(registry["training"])


def test_without_an_aws_identity_the_step_fails_and_names_what_is_missing(
    registry: dict[str, Any], s3_server: str, tmp_path: Path
) -> None:
    """In a clean process: no credential anywhere in botocore's chain (this test process hosts moto)."""
    work, sha = candidate(tmp_path)
    serving = f"{registry['address']}/mlp/serving@" + registry["push"]({images.BUNDLE_LABEL: sha}, "none")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "DOCKER_CONFIG": str(tmp_path / "no-docker-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance metadata lookups
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL_ECR": s3_server,  # were a credential found, nothing would leave loopback
        registry_auth.PROVIDER_ENV: "ecr",
    }
    argv = ["step", "images", "--work", str(work), "--training-image", registry["training"]]
    argv += ["--serving-image", serving, "--local", "false", "--flag-file", str(work / "flag")]
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", *argv],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "no AWS identity in this pod to call ecr:GetAuthorizationToken" in done.stderr
    assert "`trainer` service account" in done.stderr


def test_the_google_identity_opens_the_registry_as_oauth2accesstoken(
    registry: dict[str, Any], no_docker_config: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import google.auth
    from google.oauth2.credentials import Credentials

    asked: list[object] = []

    def default(scopes: list[str] | None = None, **_: object) -> tuple[Credentials, str]:
        asked.append(scopes)
        return Credentials(token=GOOGLE_TOKEN), "project"  # what Workload Identity's metadata server mints

    monkeypatch.setattr(google.auth, "default", default)
    monkeypatch.setenv(registry_auth.PROVIDER_ENV, "gar")
    work, sha = candidate(tmp_path)
    serving = f"{registry['address']}/mlp/serving@" + registry["push"]({images.BUNDLE_LABEL: sha}, "gar")
    assert step(work, registry["training"], serving) == (0, "true")
    assert asked == [[registry_auth.GCP_SCOPE]]


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        )
        if self.path.startswith("/redirect"):
            self.send_response(307)
            self.send_header("Location", self.path.split("?to=", 1)[1])
            self.end_headers()
            return
        payload = json.dumps(
            {"refresh_token": "acr-refresh"} if self.path == "/oauth2/exchange" else {}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer


@pytest.fixture(scope="module")
def recorder() -> Iterator[str]:
    with http_server(_Recorder) as served:
        yield served.address


def test_the_entra_id_token_is_exchanged_for_an_acr_refresh_token(
    recorder: str, no_docker_config: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit test of the exchange's request shape (no Entra ID token endpoint is faked)."""
    import azure.identity
    from azure.core.credentials import AccessToken

    scopes: list[tuple[str, ...]] = []

    class Fixed:  # DefaultAzureCredential's interface: workload identity federation mints this token
        def get_token(self, *wanted: str, **_: object) -> AccessToken:
            scopes.append(wanted)
            return AccessToken("entra-token", 2**31)

        def close(self) -> None:
            pass

    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", Fixed)
    monkeypatch.setenv(registry_auth.PROVIDER_ENV, "acr")
    _Recorder.seen.clear()
    credential = registry_auth.Credentials().get(recorder)
    assert credential is not None
    assert base64.b64decode(credential.basic).decode() == f"{registry_auth.ACR_USER}:acr-refresh"
    assert scopes == [(registry_auth.AZURE_SCOPE,)]
    (request,) = _Recorder.seen
    assert (request["method"], request["path"]) == ("POST", "/oauth2/exchange")
    assert request["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    assert urllib.parse.parse_qs(request["body"].decode()) == {
        "grant_type": ["access_token"],
        "service": ["127.0.0.1"],
        "access_token": ["entra-token"],
    }


def test_the_registry_authorization_is_not_sent_to_a_redirected_host(recorder: str) -> None:
    """ECR/GAR/ACR redirect blob reads to signed storage URLs: S3 refuses a second auth mechanism."""
    port = recorder.split(":")[1]
    _Recorder.seen.clear()
    for target in (f"http://localhost:{port}/blob", f"http://{recorder}/blob"):
        req = urllib.request.Request(
            f"http://{recorder}/redirect?to={target}", headers={"Authorization": "Bearer registry-token"}
        )
        images._OPENER.open(req, timeout=10).close()
    elsewhere, same = _Recorder.seen[1], _Recorder.seen[3]
    assert "Authorization" not in elsewhere["headers"]  # another host: dropped
    assert same["headers"]["Authorization"] == "Bearer registry-token"  # the registry itself: kept


@pytest.mark.parametrize(
    ("host", "cloud"),
    [
        ("123456789012.dkr.ecr.eu-south-2.amazonaws.com", "ecr"),
        ("europe-southwest1-docker.pkg.dev", "gar"),
        ("mlplatformdev.azurecr.io", "acr"),
        ("127.0.0.1:5000", None),
        ("ghcr.io", None),
    ],
)
def test_registry_hosts_map_to_their_cloud(host: str, cloud: str | None, no_docker_config: None) -> None:
    assert registry_auth.provider(host) == cloud


def test_an_unknown_provider_override_is_a_usage_error(
    registry: dict[str, Any], tmp_path: Path, no_docker_config: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(registry_auth.PROVIDER_ENV, "quay")
    work, _ = candidate(tmp_path)
    assert step(work, registry["training"], registry["training"])[0] == 2
