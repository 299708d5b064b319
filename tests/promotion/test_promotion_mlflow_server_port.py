"""The promotion tests' `mlflow server` (promotion_fixtures.mlflow_server) when its picked port is taken first.

Its uvicorn worker binds the port seconds after the start; a port taken in between (another test's server, an
outgoing connection) made it exit ("address already in use") and failed the test that wanted a registry.
"""

from __future__ import annotations

import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from localservers import stop_group
from tests.promotion.promotion_fixtures import mlflow_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # two `mlflow server` starts: 18-26 s on 2 cores


def test_a_port_taken_between_the_pick_and_the_start_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("uvicorn", reason="`mlflow server` needs uvicorn (in the project's lock)")
    taken: list[socket.socket] = []
    real_popen = subprocess.Popen

    def popen(args: list[str], **kwargs: Any) -> subprocess.Popen:
        if not taken:  # the first start's port gets a listener that accepts and never answers
            taken.append(socket.socket())
            taken[0].bind(("127.0.0.1", int(args[args.index("--port") + 1])))
            taken[0].listen()
        return real_popen(args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    try:
        server, url = mlflow_server(tmp_path / "mlflow.db")
    finally:
        monkeypatch.undo()
        lost = taken[0].getsockname()[1]
        taken[0].close()
    try:
        assert not url.endswith(f":{lost}")
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            assert response.read() == b"OK"
    finally:
        stop_group(server, grace_s=20)
    assert "already in use" in (tmp_path / "mlflow-server.log").read_text()
