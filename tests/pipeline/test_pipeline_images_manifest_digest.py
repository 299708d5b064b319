"""`containers.registry.manifest_digest` (the check after `containers.build --push`) against a registry with auth.

ECR, Artifact Registry and ACR refuse anonymous reads, so the check goes through the same client as the
pipeline's `images` step (pipeline/images.py, credentials from pipeline/registry_auth.py). The registry is the
real `docker-registry` with htpasswd Basic auth of tests/pipeline/conftest.py; images are pushed over the
Registry HTTP API as CI's push leaves them (tests/pipeline/test_pipeline_images.py `push`).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from containers import registry as container_registry
from containers.errors import ContainerError
from tests.httpd import http_server

pytestmark = pytest.mark.integration


def _docker_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, user: str, password: str
) -> None:
    folder = tmp_path / "docker"
    folder.mkdir()
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    (folder / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(folder))


def test_the_pushed_digest_is_confirmed_with_docker_config_credentials(
    registry: dict[str, Any],
    ecr_password: str,
    no_docker_config: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    digest = registry["push"]({"org.opencontainers.image.version": "confirm"}, "0.1.0-confirm")
    repository = f"{registry['address']}/mlp/serving"
    _docker_config(tmp_path, monkeypatch, registry["address"], "AWS", ecr_password)
    assert container_registry.manifest_digest(f"{repository}:0.1.0-confirm") == digest
    assert container_registry.manifest_digest(f"{repository}@{digest}") == digest


def test_without_credentials_it_is_a_container_error_that_names_the_fix(
    registry: dict[str, Any], no_docker_config: None
) -> None:
    registry["push"]({"org.opencontainers.image.version": "anonymous"}, "0.1.0-anonymous")
    # A ContainerError (not urllib's HTTPError): containers.build reports it and exits 1, no traceback.
    with pytest.raises(ContainerError) as err:
        container_registry.manifest_digest(f"{registry['address']}/mlp/serving:0.1.0-anonymous")
    message = str(err.value)
    assert "HTTP 401" in message and "asks for credentials" in message
    assert "docker login" in message and "DOCKER_CONFIG" in message


def test_refused_credentials_say_which_entry_was_refused(
    registry: dict[str, Any], no_docker_config: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry["push"]({}, "0.1.0-refused")
    _docker_config(tmp_path, monkeypatch, registry["address"], "AWS", "stale-token")
    with pytest.raises(ContainerError, match="refused the DOCKER_CONFIG entry"):
        container_registry.manifest_digest(f"{registry['address']}/mlp/serving:0.1.0-refused")


class _Lying(http.server.BaseHTTPRequestHandler):
    """A registry whose Docker-Content-Digest is not the hash of the manifest it sends."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b'{"schemaVersion": 2}'
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Docker-Content-Digest", "sha256:" + hashlib.sha256(b"other").hexdigest())
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def lying_registry() -> Iterator[str]:
    with http_server(_Lying) as served:
        yield served.address


def test_a_digest_header_that_is_not_the_hash_of_the_bytes_is_refused(
    lying_registry: str, no_docker_config: None
) -> None:
    with pytest.raises(ContainerError, match="hashing to"):
        container_registry.manifest_digest(f"{lying_registry}/mlp/serving:1")


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:5000", "127.0.0.2:5000", "localhost:5000", "[::1]:5000", "reg.example", "10.0.0.1:5000"],
)
def test_push_and_check_agree_on_which_registries_are_plain_http(host: str) -> None:
    """buildah pushes to a loopback registry over HTTP (containers/registry.py); the check must read it so too."""
    from pipeline import registry_auth

    assert registry_auth.loopback(host) == container_registry.is_loopback(host)
