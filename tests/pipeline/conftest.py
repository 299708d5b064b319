"""The pipeline tests' shared servers: a real `docker-registry` on 127.0.0.1 with htpasswd Basic auth.

Its users are the pairs each cloud identity yields: `AWS` with the password moto's ECR `GetAuthorizationToken`
hands out, `oauth2accesstoken` with a Google access token. One registry serves every module of this package.
"""

from __future__ import annotations

import base64
import shutil
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localservers import start_on_free_port, stop_group
from pipeline import registry_auth
from tests.pipeline.test_pipeline_images import push

REGION = "eu-south-2"
GOOGLE_TOKEN = "ya29.test-access-token"


def _bcrypt(password: str) -> str:
    """A bcrypt hash for the registry's htpasswd (distribution accepts bcrypt only), from libxcrypt."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt
        except ImportError:
            pytest.skip("the crypt module (Python < 3.13) makes the htpasswd bcrypt hashes")
    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))
    if not hashed or not hashed.startswith("$2"):
        pytest.skip("this libc's crypt() has no bcrypt")
    return hashed


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture(scope="package")
def ecr_password(s3_server: str) -> str:
    """What ECR's GetAuthorizationToken answers moto's account with (base64 `AWS:<password>`)."""
    import boto3

    client = boto3.client(
        "ecr",
        endpoint_url=s3_server,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    token = client.get_authorization_token()["authorizationData"][0]["authorizationToken"]
    user, password = base64.b64decode(token).decode().split(":", 1)
    assert user == "AWS"
    return str(password)


@pytest.fixture(scope="package")
def registry(tmp_path_factory: pytest.TempPathFactory, ecr_password: str) -> Iterator[dict[str, Any]]:
    if shutil.which("docker-registry") is None:
        pytest.skip("docker-registry is not installed (apt-get install -y docker-registry)")

    root = tmp_path_factory.mktemp("auth-registry")
    (root / "htpasswd").write_text(
        f"AWS:{_bcrypt(ecr_password)}\n{registry_auth.GAR_USER}:{_bcrypt(GOOGLE_TOKEN)}\n"
    )
    config = root / "registry.yml"

    def command(port: int) -> list[str]:
        config.write_text(
            f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {root / 'storage'}\n"
            f"http:\n  addr: 127.0.0.1:{port}\n"
            f"auth:\n  htpasswd:\n    realm: test-registry\n    path: {root / 'htpasswd'}\n"
        )
        return ["docker-registry", "serve", str(config)]

    def ready(port: int) -> bool:  # anonymous /v2/ gets 401 once it serves
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2).close()
        except urllib.error.HTTPError as exc:
            return exc.code == 401
        except OSError:
            return False
        return False

    proc, port = start_on_free_port(command, root / "registry.log", "docker-registry", ready, timeout_s=30)
    try:
        address = f"127.0.0.1:{port}"
        auth = _basic("AWS", ecr_password)
        yield {
            "address": address,
            "training": f"{address}/mlp/training@" + push(address, "mlp/training", {}, auth=auth),
            "push": lambda labels, tag: push(address, "mlp/serving", labels, tag, auth=auth),
        }
    finally:
        stop_group(proc, grace_s=60)


@pytest.fixture
def no_docker_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))
    monkeypatch.delenv(registry_auth.PROVIDER_ENV, raising=False)
