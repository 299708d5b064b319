"""Interruption notices from a local fake metadata endpoint, and the signal path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from training import preemption


class FakeMetadata:
    """Answers like AWS IMDSv2, the GCP metadata server and Azure Scheduled Events; `interrupt()` flips them."""

    def __init__(self) -> None:
        self.interrupted = False
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: str = "") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:
                fake.requests.append(("PUT", self.path, dict(self.headers)))
                if self.path == "/latest/api/token" and self.headers.get(
                    "X-aws-ec2-metadata-token-ttl-seconds"
                ):
                    return self._send(200, "TOKEN123")
                return self._send(400)

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path, dict(self.headers)))
                if self.path == "/latest/meta-data/spot/instance-action":
                    if self.headers.get("X-aws-ec2-metadata-token") != "TOKEN123":
                        return self._send(401)
                    if fake.interrupted:
                        return self._send(
                            200, json.dumps({"action": "terminate", "time": "2026-12-02T14:00:00Z"})
                        )
                    return self._send(404)
                if self.path == "/computeMetadata/v1/instance/preempted":
                    if self.headers.get("Metadata-Flavor") != "Google":
                        return self._send(403)
                    return self._send(200, "TRUE" if fake.interrupted else "FALSE")
                if self.path.startswith("/metadata/scheduledevents"):
                    if self.headers.get("Metadata") != "true":
                        return self._send(400)
                    events = [{"EventId": "E1", "EventType": "Freeze", "NotBefore": "soon"}]
                    if fake.interrupted:
                        events.append(
                            {"EventId": "E2", "EventType": "Preempt", "NotBefore": "Wed, 02 Dec 2026"}
                        )
                    return self._send(200, json.dumps({"DocumentIncarnation": 1, "Events": events}))
                return self._send(404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def interrupt(self) -> None:
        self.interrupted = True


@pytest.fixture
def metadata() -> Iterator[FakeMetadata]:
    fake = FakeMetadata()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_notice_fires_only_when_interrupted(metadata: FakeMetadata, provider: str) -> None:
    notice = preemption.notice_for(provider, metadata.url)
    assert notice is not None
    assert notice.poll() is None
    metadata.interrupt()
    found = notice.poll()
    assert found is not None and found.startswith(provider)


def test_aws_uses_an_imdsv2_token(metadata: FakeMetadata) -> None:
    metadata.interrupt()
    assert "terminate" in (preemption.AwsSpotNotice(metadata.url).poll() or "")
    assert [r[:2] for r in metadata.requests] == [
        ("PUT", "/latest/api/token"),
        ("GET", "/latest/meta-data/spot/instance-action"),
    ]


def test_unreachable_endpoint_is_no_notice() -> None:
    from tests.training.picked_ports import held_port

    with held_port() as port:  # refuses connections, and no other process can listen there meanwhile
        dead = f"http://127.0.0.1:{port}"
        for provider in ("aws", "gcp", "azure"):
            notice = preemption.notice_for(provider, dead)
            assert notice is not None and notice.poll() is None


def test_unreachable_endpoint_is_logged_once_not_every_poll(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from tests.training.picked_ports import held_port

    caplog.set_level(logging.WARNING, logger=preemption.__name__)
    with held_port() as port:
        dead = f"http://127.0.0.1:{port}"
        for provider in ("aws", "gcp", "azure"):
            notice = preemption.notice_for(provider, dead)
            assert notice is not None
            for _ in range(4):
                assert notice.poll() is None
    lines = [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(lines) == 3, lines  # one per watcher, not one per poll
    assert all(dead in line and "SIGTERM only" in line for line in lines)


def test_watcher_from_environment_sets_the_stop_request(metadata: FakeMetadata, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("TRAINING_INTERRUPTION_PROVIDER", "gcp")
    monkeypatch.setenv("TRAINING_METADATA_ENDPOINT", metadata.url)
    monkeypatch.setenv("TRAINING_INTERRUPTION_POLL_S", "0.05")
    stop = preemption.StopRequest()
    watcher = preemption.start_watcher(stop)
    assert watcher is not None
    try:
        assert not stop.wait(0.3)
        metadata.interrupt()
        assert stop.wait(5.0)
        assert stop.reason == "gcp preempted"
    finally:
        watcher.close()


def test_sigterm_sets_the_flag_and_second_sigint_interrupts() -> None:
    stop = preemption.StopRequest()
    uninstall = preemption.install_signal_handlers(stop)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop and stop.reason == "SIGTERM"
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        uninstall()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))


def test_unknown_provider_is_a_config_error() -> None:
    from training.errors import ConfigError

    with pytest.raises(ConfigError, match="aws, gcp or azure"):
        preemption.notice_for("oracle")


# The start of `python -m training` (training/__main__.py), then code standing for a library whose import
# catches everything and raises its own error: the SIGTERM lands while it runs.
_EARLY = """
import os, signal, sys, time
from training.preemption import install_early_exit
install_early_exit()
if sys.argv[1] == "converted":
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
    except BaseException:
        raise ModuleNotFoundError("No module named 'transformers.models.bert.modeling_bert'")
elif sys.argv[1] == "signal":
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
sys.exit(3)
"""


@pytest.mark.parametrize(("case", "code"), [("converted", 75), ("signal", 75), ("no-signal", 3)])
def test_a_sigterm_before_training_exits_75_whatever_the_code_it_lands_in_makes_of_it(
    case: str, code: int
) -> None:
    """The early handler's SystemExit is raised inside whatever runs: an import that catches everything turned it
    into its own error, and the pipeline's train step exited 1 (a real failure to the Job) instead of 75."""
    done = subprocess.run(
        [sys.executable, "-c", _EARLY, case], cwd=Path(__file__).resolve().parents[2],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == code, done.stderr[-2000:]
    if case != "no-signal":
        assert "SIGTERM before training started: nothing to save, exit 75" in done.stderr
