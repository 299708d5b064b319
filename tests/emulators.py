"""Object-store emulators the tests start on free loopback ports: moto's S3 server, gcp-storage-emulator and
Azurite; each returns what to stop and the environment that points the SDKs at it. Stop the two subprocesses with
demo.stages.kill_group (they run in their own sessions), moto's threaded server with `.stop()`."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[1]
AZURITE = REPO / "tools" / "npm" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's documented development account (public, the same in every Azurite install).
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"emulator exited {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"emulator did not listen on {port} within {timeout} s")


def start_gcs() -> tuple[subprocess.Popen, dict[str, str]]:
    port = free_port()
    exe = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "gcp-storage-emulator"
    if not exe.exists():
        pytest.skip("gcp-storage-emulator is not installed in the virtualenv: run `make setup`")
    proc = subprocess.Popen(
        [str(exe), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _wait_port(port, proc)
    return proc, {
        "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}",
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
    }


def start_azurite(folder: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    if not AZURITE.exists():
        pytest.skip("Azurite is not installed under tools/npm: run `make setup`")
    port = free_port()
    proc = subprocess.Popen(
        [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(folder)]
        + ["--skipApiVersionCheck", "--silent", "--loose"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _wait_port(port, proc)
    conn = (
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
    )
    return proc, {"AZURE_STORAGE_CONNECTION_STRING": conn}


def start_moto() -> tuple[object, dict[str, str]]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    return server, {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-south-2",
    }
