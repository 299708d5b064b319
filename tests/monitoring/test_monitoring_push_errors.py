"""A Pushgateway that is down or refuses a push: the jobs say so and exit 2, and the drift report survives.

Found by running `python -m monitoring drift` with MONITORING_PUSHGATEWAY_URL at a closed port: a urllib
URLError traceback, exit 1 (what `--fail-on-drift` documents as "drift detected"); with an object-storage
--out the finished report was discarded with the job's temporary folder. evaluate and budget push through
the same monitoring.metrics.export.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from synthetic_records import record, write

from monitoring import metrics
from tests.httpd import http_server


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there once the socket is closed


@pytest.fixture
def refusing_gateway() -> Iterator[str]:
    """Answers every push as a real Pushgateway answers an inconsistent one: 400 with a reason."""

    class Refuse(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(400)
            self.end_headers()
            self.wfile.write(b"pushed metrics are invalid or inconsistent with existing metrics")

        def log_message(self, *args: object) -> None:
            pass

    with http_server(Refuse) as served:
        yield served.url


def gauges() -> dict:
    return metrics.drift_gauges("sentiment", 0.5, 0.3, True)


def test_an_unreachable_gateway_is_a_push_error_after_metrics_prom_is_written(tmp_path: Path) -> None:
    url = closed_port_url()
    with pytest.raises(metrics.PushError, match=f"Pushgateway {url} .*URLError") as caught:
        metrics.export(metrics.DRIFT_JOB, {"model": "sentiment"}, gauges(), out_dir=tmp_path, pushgateway=url)
    assert "MONITORING_PUSHGATEWAY_URL" in str(caught.value)
    assert 'ml_drift_score{model="sentiment"} 0.5' in (tmp_path / "metrics.prom").read_text()


def test_a_refused_push_is_a_push_error_naming_the_answer(refusing_gateway: str, tmp_path: Path) -> None:
    with pytest.raises(metrics.PushError, match="HTTPError: HTTP Error 400"):
        metrics.export(metrics.DRIFT_JOB, {"model": "sentiment"}, gauges(), out_dir=None,
                       pushgateway=refusing_gateway)  # fmt: skip


@pytest.mark.integration  # Evidently runs on the window (about 10 s on 2 cores)
def test_the_drift_job_keeps_its_report_and_exits_2_when_the_gateway_is_down(tmp_path: Path) -> None:
    rng = random.Random(5)
    ref = write(tmp_path / "reference.jsonl", [record(i, rng) for i in range(200)])
    cur = write(tmp_path / "current.jsonl", [record(i, rng) for i in range(60)])
    url = closed_port_url()
    done = subprocess.run(
        [sys.executable, "-m", "monitoring", "drift", "--reference", str(ref), "--current", str(cur),
         "--out", str(tmp_path / "out"), "--fail-on-drift"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "MONITORING_PUSHGATEWAY_URL": url},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and f"to the Pushgateway {url}" in done.stderr, done.stderr
    assert "drift.html" in done.stdout  # the verdict is still printed and the report written
    assert json.loads((tmp_path / "out" / "drift.json").read_text())["current"]["rows"] == 60
