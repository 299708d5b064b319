"""Object-store emulators the tests start on free loopback ports: moto's S3 server, gcp-storage-emulator and
Azurite; each returns what to stop and the environment that points the SDKs at it. Stop the two subprocesses with
localservers.stop_group (they run in their own sessions), moto's threaded server with `.stop()`.

Each starts through localservers.start_on_free_port: a port picked free can be taken before the server binds it,
so a server that lost its port is started again on a fresh one."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from localservers import start_on_free_port

REPO = Path(__file__).resolve().parents[1]
AZURITE = REPO / "tools" / "npm" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's documented development account (public, the same in every Azurite install).
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def start_gcs() -> tuple[subprocess.Popen, dict[str, str]]:
    exe = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "gcp-storage-emulator"
    if not exe.exists():
        pytest.skip("gcp-storage-emulator is not installed in the virtualenv: run `make setup`")
    fd, name = tempfile.mkstemp(prefix="gcs-emulator-", suffix=".log")
    os.close(fd)
    try:  # its bind error is in a thread: the process lives on without a listener
        proc, port = start_on_free_port(
            lambda port: [str(exe), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"],
            Path(name), "gcp-storage-emulator", grace_s=10,
        )  # fmt: skip
    finally:
        os.unlink(name)  # the emulator keeps its open file; nothing is left in /tmp
    return proc, {
        "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}",
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
    }


def start_azurite(folder: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    if not AZURITE.exists():
        pytest.skip("Azurite is not installed under tools/npm: run `make setup`")
    folder.mkdir(parents=True, exist_ok=True)
    # Only the blob service: the connection string below names no queue or table endpoint.
    proc, port = start_on_free_port(
        lambda port: [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(folder),
                      "--skipApiVersionCheck", "--silent", "--loose"],
        folder / "azurite.log", "azurite-blob", grace_s=2,  # it ignores SIGTERM: 10 s of nothing otherwise
    )  # fmt: skip
    conn = (
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
    )
    return proc, {"AZURE_STORAGE_CONNECTION_STRING": conn}


class MotoServer:
    """moto's server (S3 and every other service) in this process on 127.0.0.1:`port`, 0 for a free one.

    moto's ThreadedMotoServer binds in its thread: a taken port left start() waiting forever (the bind error stays
    in the thread). Here the bind happens in the caller, so a taken port raises at once. moto's state lives in the
    process: a server started again on the same port (after an outage a test staged) finds its buckets."""

    def __init__(self, port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", port, app, True, request_handler=MotoRequestHandler)
        self.port = int(self._server.server_address[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def start_moto() -> tuple[MotoServer, dict[str, str]]:
    server = MotoServer()
    endpoint = server.endpoint
    return server, {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-south-2",
    }
