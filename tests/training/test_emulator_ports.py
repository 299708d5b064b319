"""The object-store emulators (tests/emulators.py) when the port picked for them is taken before they bind it.

A free port is free only until someone binds it: another test's server, an outgoing connection. The old starters
declared an emulator ready when anything accepted a connection on its port, so a stranger there passed for
gcp-storage-emulator (whose bind error stays in a thread: it lives on without a listener) or Azurite (which exits);
moto's threaded server waited forever for a bind that had failed in its thread.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import localservers
import tests.emulators as emulators
from localservers import stop_group

pytestmark = pytest.mark.integration


def _port(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1].split("/")[0])


def test_gcs_emulator_on_a_taken_port_is_started_again(taken: int) -> None:
    proc, env = emulators.start_gcs()
    try:
        endpoint = env["STORAGE_EMULATOR_HOST"]
        assert _port(endpoint) != taken
        with urllib.request.urlopen(f"{endpoint}/storage/v1/b?project=test", timeout=5) as response:
            assert json.load(response)["kind"] == "storage#buckets"
    finally:
        stop_group(proc, grace_s=10)


def test_azurite_on_a_taken_port_is_started_again(taken: int, tmp_path: Path) -> None:
    proc, env = emulators.start_azurite(tmp_path / "azurite")
    try:
        endpoint = env["AZURE_STORAGE_CONNECTION_STRING"].split("BlobEndpoint=")[1].rstrip(";")
        assert _port(endpoint) != taken
        with pytest.raises(
            urllib.error.HTTPError
        ) as answer:  # Azurite itself: an unsigned request is refused
            urllib.request.urlopen(f"{endpoint}?comp=list", timeout=5)
        assert answer.value.headers["x-ms-request-id"]
    finally:
        stop_group(proc, grace_s=2)  # Azurite ignores SIGTERM
    assert "EADDRINUSE" in (tmp_path / "azurite" / "azurite.log").read_text()


@pytest.mark.timeout(30)  # the old start() waited forever
def test_moto_binds_its_own_free_port(taken: int) -> None:
    server, env = emulators.start_moto()
    try:
        endpoint = env["AWS_ENDPOINT_URL_S3"]
        assert _port(endpoint) != taken
        with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=5) as response:
            assert response.status == 200
    finally:
        server.stop()


def test_every_pick_taken_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        monkeypatch.setattr(localservers, "free_port", lambda: sock.getsockname()[1])
        with pytest.raises(RuntimeError, match="gcp-storage-emulator lost each of 3 free ports"):
            emulators.start_gcs()
