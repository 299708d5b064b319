"""The private OCI registry's port is picked free, then bound by the registry a moment later: in between another
process (another test's server, an outgoing connection) can take it. The registry then exits with "bind: address
already in use"; a stranger listening there must neither fail the start nor be mistaken for the registry."""

from __future__ import annotations

import shutil
import socket
import urllib.request
from pathlib import Path

import pytest

import localservers
from containers import services
from containers.errors import ContainerError
from tests.conftest import pick_first

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("docker-registry") is None, reason="apt-get install -y docker-registry"),
]


def test_a_registry_port_taken_after_the_pick_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stranger: int
) -> None:
    pick_first(monkeypatch, stranger)
    with services.oci_registry(tmp_path / "reg") as address:
        assert address != f"127.0.0.1:{stranger}"
        with urllib.request.urlopen(f"http://{address}/v2/_catalog", timeout=5) as response:
            assert b"repositories" in response.read()  # the registry itself, not the stranger
    assert "already in use" in (tmp_path / "reg" / "registry.log").read_text()


def test_a_silent_listener_on_the_picked_port_is_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        pick_first(monkeypatch, taken.getsockname()[1])
        with services.oci_registry(tmp_path / "reg") as address:
            assert address != f"127.0.0.1:{taken.getsockname()[1]}"


def test_every_picked_port_taken_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr(localservers, "free_port", lambda: taken.getsockname()[1])
        with (
            pytest.raises(ContainerError, match=r"docker-registry lost each of 3 free ports"),
            services.oci_registry(tmp_path / "reg"),
        ):
            pass
