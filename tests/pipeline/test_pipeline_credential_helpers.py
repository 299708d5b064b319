"""Credential helpers in the Docker config (credHelpers, credsStore), as the Docker CLI runs them.

The registry is the real htpasswd one of tests/pipeline/conftest.py. The helper that opens it is a script
speaking the docker-credential-helpers protocol (`get`, the host on stdin, `{"Username", "Secret"}` on stdout,
`credentials not found in native keychain` and exit 1 for an unknown host), since the real helpers store their
secrets in a desktop keychain or a cloud. Google's own `docker-credential-gcloud` (google-cloud-cli) runs
offline on a token file: it checks the lookup against a real helper, for an Artifact Registry host name.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline import images, registry_auth

pytestmark = pytest.mark.integration

HELPER = "mlptest"
_SCRIPT = """#!{python}
import json, sys
host = sys.stdin.read().strip()
if sys.argv[1:] != ["get"]:
    sys.exit("only get")
secrets = json.load(open({store!r}))
if host not in secrets:
    print("credentials not found in native keychain")
    sys.exit(1)
print(json.dumps({{"ServerURL": host, **secrets[host]}}))
"""


def _helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secrets: dict[str, dict[str, str]]) -> None:
    """docker-credential-mlptest on PATH, holding ``secrets`` per host."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (tmp_path / "secrets.json").write_text(json.dumps(secrets))
    exe = bindir / f"docker-credential-{HELPER}"
    exe.write_text(_SCRIPT.format(python=sys.executable, store=str(tmp_path / "secrets.json")))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any]) -> None:
    folder = tmp_path / "docker"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("DOCKER_CONFIG", str(folder))
    monkeypatch.setenv(registry_auth.PROVIDER_ENV, "none")  # no cloud identity behind the helper


def _auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("where", ["credHelpers", "credsStore"])
def test_a_credential_helper_opens_the_registry_before_the_file_entry(
    registry: dict[str, Any], ecr_password: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    host = registry["address"]
    _helper(tmp_path, monkeypatch, {host: {"Username": "AWS", "Secret": ecr_password}})
    stale = {"auths": {host: {"auth": _auth("AWS", "stale-token")}}}
    chosen = {"credHelpers": {host: HELPER}} if where == "credHelpers" else {"credsStore": HELPER}
    _config(tmp_path, monkeypatch, {**stale, **chosen})
    assert images.resolve(registry["training"])["digest"] == registry["training"].rsplit("@", 1)[1]


def test_a_helper_that_does_not_know_the_host_leaves_the_file_entry(
    registry: dict[str, Any], ecr_password: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = registry["address"]
    _helper(tmp_path, monkeypatch, {"other.example:5000": {"Username": "u", "Secret": "p"}})
    _config(
        tmp_path, monkeypatch, {"credsStore": HELPER, "auths": {host: {"auth": _auth("AWS", ecr_password)}}}
    )
    assert images.resolve(registry["training"])["digest"] == registry["training"].rsplit("@", 1)[1]
    # ...and with no entry either, the registry's refusal says no credential applied.
    _config(tmp_path, monkeypatch, {"credsStore": HELPER})
    with pytest.raises(registry_auth.RegistryError, match="asks for credentials and none apply"):
        images.resolve(registry["training"])


def test_a_helper_with_the_wrong_secret_is_named_in_the_refusal(
    registry: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = registry["address"]
    _helper(tmp_path, monkeypatch, {host: {"Username": "AWS", "Secret": "expired"}})
    _config(tmp_path, monkeypatch, {"credHelpers": {host: HELPER}})
    with pytest.raises(
        registry_auth.RegistryError, match=f"refused the credential helper docker-credential-{HELPER}"
    ):
        images.resolve(registry["training"])


def test_a_missing_helper_and_an_identity_token_are_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = "registry.example:5000"
    _config(tmp_path, monkeypatch, {"credsStore": "desktop"})  # a config.json copied from Docker Desktop
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(registry_auth.RegistryError, match="docker-credential-desktop is not on PATH"):
        registry_auth.Credentials().get(host)
    _helper(tmp_path, monkeypatch, {host: {"Username": registry_auth.TOKEN_USER, "Secret": "refresh"}})
    _config(tmp_path, monkeypatch, {"credHelpers": {host: HELPER}})
    with pytest.raises(registry_auth.RegistryError, match="identity token"):
        registry_auth.Credentials().get(host)


@pytest.fixture
def gcloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Google's docker-credential-gcloud on an access-token file: no account, no network."""
    if shutil.which("docker-credential-gcloud") is None:
        pytest.skip("docker-credential-gcloud is not installed (google-cloud-cli, present on the CI image)")
    token = "ya29.token-from-a-file"
    (tmp_path / "token").write_text(token)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", str(tmp_path / "token"))
    monkeypatch.setenv("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
    return token


def test_googles_own_helper_answers_for_an_artifact_registry_host(
    gcloud: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = "europe-southwest1-docker.pkg.dev"
    # What `gcloud auth configure-docker europe-southwest1-docker.pkg.dev` writes.
    _config(tmp_path, monkeypatch, {"credHelpers": {host: "gcloud"}})
    credential = registry_auth.Credentials().get(host)
    assert credential is not None and "docker-credential-gcloud" in credential.source
    user, secret = base64.b64decode(credential.basic).decode().split(":", 1)
    assert secret == gcloud and user  # the helper's own user name (_dcgcloud_token), whatever it is
    # A host gcloud does not serve: its own error, not a silent anonymous request.
    _config(tmp_path, monkeypatch, {"credHelpers": {"127.0.0.1:5000": "gcloud"}})
    with pytest.raises(
        registry_auth.RegistryError, match=r"docker-credential-gcloud get 127.0.0.1:5000 failed"
    ):
        registry_auth.Credentials().get("127.0.0.1:5000")
