"""Ports of the local alert path (monitoring.localstack) taken between the pick and the server's bind.

A free port is free only until someone binds it: another test's Alertmanager, an outgoing connection. The
server then logs "bind: address already in use" and exits (Pushgateway with code 0). The old start declared
Alertmanager ready on whatever answered on its port, then pointed Prometheus at that stranger.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
import urllib.request
from pathlib import Path

import pytest

import localservers
from localservers import http_ok
from monitoring.localstack import LocalAlerting
from tests.conftest import pick_first

pytestmark = pytest.mark.integration


def _alertmanagers(prometheus: str, timeout_s: float = 20) -> list[str]:
    """The Alertmanagers Prometheus sends to, once it has discovered any (shortly after it is ready)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with urllib.request.urlopen(f"{prometheus}/api/v1/alertmanagers", timeout=5) as response:
            active = [a["url"] for a in json.load(response)["data"]["activeAlertmanagers"]]
        if active or time.monotonic() > deadline:
            return active
        time.sleep(0.2)


@pytest.mark.skipif(
    not (shutil.which("prometheus") and shutil.which("prometheus-alertmanager")),
    reason="apt-get install prometheus prometheus-alertmanager (.ci/run installs them)",
)
def test_taken_ports_are_picked_again_and_prometheus_alerts_our_alertmanager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stranger: int
) -> None:
    # Alertmanager's first pick and Prometheus's first pick are taken (each server's second pick is free).
    pick_first(monkeypatch, stranger, 0, stranger)
    with LocalAlerting(tmp_path / "stack", metrics_dirs=[]) as stack:
        urls = [stack.alertmanager_url, stack.prometheus_url]
        assert not [url for url in urls if url.endswith(f":{stranger}")]
        assert _alertmanagers(stack.prometheus_url) == [f"{stack.alertmanager_url}/api/v2/alerts"]
    assert "already in use" in (tmp_path / "stack" / "alertmanager.log").read_text()


@pytest.mark.skipif(
    shutil.which("prometheus-pushgateway") is None, reason="apt-get install prometheus-pushgateway"
)
def test_a_pushgateway_that_lost_its_port_exits_0_and_is_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = shutil.which("prometheus-pushgateway")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()  # never answers
        pick_first(monkeypatch, taken.getsockname()[1])
        proc, port = localservers.start_on_free_port(
            lambda port: [str(gateway), "--persistence.file=", f"--web.listen-address=127.0.0.1:{port}"],
            tmp_path / "gateway.log", "pushgateway", http_ok("/-/ready"), timeout_s=30,
        )  # fmt: skip
        lost = taken.getsockname()[1]
    try:
        assert port != lost and localservers.listens(proc.pid, port)
    finally:
        localservers.stop_group(proc)
    assert proc.returncode is not None


def test_every_pick_taken_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = shutil.which("prometheus-pushgateway")
    if gateway is None:
        pytest.skip("apt-get install prometheus-pushgateway")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr(localservers, "free_port", lambda: taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="pushgateway lost each of 3 free ports"):
            localservers.start_on_free_port(
                lambda port: [gateway, "--persistence.file=", f"--web.listen-address=127.0.0.1:{port}"],
                tmp_path / "gateway.log", "pushgateway", http_ok("/-/ready"), timeout_s=30,
            )  # fmt: skip
