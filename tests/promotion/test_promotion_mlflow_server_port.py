"""The promotion tests' `mlflow server` (promotion_fixtures.mlflow_server) when its picked port is taken first.

Its uvicorn worker binds the port seconds after the start; a port taken in between (another test's server, an
outgoing connection) made it exit ("address already in use") and failed the test that wanted a registry.
Also: the server leaves nothing on the machine once stopped (its job runner's /dev/shm queue folder was left at every
start, one per server the suite ran).
"""

from __future__ import annotations

import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import psutil
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
        queues = _job_queue_folders(server.pid)
    finally:
        stop_group(server, grace_s=20)
    assert "already in use" in (tmp_path / "mlflow-server.log").read_text()
    assert not queues, f"the server made {sorted(queues)} for its job runner, which nothing removes"


def _job_queue_folders(pid: int) -> set[str]:
    """The folders MLflow made for its job runner's queue: it hands the path to its workers in this variable."""
    folders = set()
    root = psutil.Process(pid)
    for proc in (root, *root.children(recursive=True)):
        try:
            if folder := proc.environ().get("_MLFLOW_HUEY_STORAGE_PATH"):
                folders.add(folder)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return folders
