"""`loadtest --timeout` bounds each request, over HTTP and gRPC, against real KServe-v2 peers that are ready
but answer inference slowly (in-process fakes of the two protocols: a stuck tritonserver cannot be made on
purpose). Before the fix the flag was parsed and dropped: every request waited up to a fixed 30 s, so a
5 s answer was a success and the report showed no errors. Over HTTP it then bounded each socket read only: a
peer that trickles its answer (a byte every TIMEOUT_S / 2) kept one request going for SLOW_S, a success."""

from __future__ import annotations

import contextlib
import json
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.httpd import http_server

SLOW_S = 5.0  # the peer's answer: far past --timeout, and well within the old fixed 30 s
TIMEOUT_S = 0.5
MODEL = "sentiment"


class _Peer:
    """What a test sets and reads: the answer's delay; `release` ends every wait at teardown."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.delay_s = 0.0
        self.trickle_s = 0.0  # HTTP: send the answer's body a byte at a time, this far apart, for delay_s
        self.release = threading.Event()
        self.url = ""


class _KServeHTTP(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as tritonclient's HTTP client expects
    peer: _Peer

    def log_message(self, *args: object) -> None:  # quiet: requests are the test's own
        pass

    def _send(self, status: int, body: bytes = b"", trickle: int = 0) -> None:
        """`trickle` leading spaces (valid JSON whitespace) go out one every `peer.trickle_s`: the connection
        is never quiet for a socket timeout's length, while the answer takes trickle x trickle_s."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(trickle + len(body)))
        self.end_headers()
        self.wfile.flush()
        for _ in range(trickle):
            if self.peer.release.wait(self.peer.trickle_s):
                return
            self.wfile.write(b" ")
            self.wfile.flush()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        ready = self.path.rstrip("/") in ("/v2/health/ready", f"/v2/models/{MODEL}/ready")
        self._send(200 if ready else 404)

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != f"/v2/models/{MODEL}/infer":
            self._send(404)
            return
        head = json.loads(body[: int(self.headers.get("Inference-Header-Content-Length", len(body)))])
        n = int(head["inputs"][0]["shape"][0])
        trickle = int(self.peer.delay_s / self.peer.trickle_s) if self.peer.trickle_s else 0
        if not trickle:
            self.peer.release.wait(self.peer.delay_s)
        answer = {
            "model_name": MODEL,
            "outputs": [
                {"name": "LABEL", "datatype": "BYTES", "shape": [n, 1], "data": ["positive"] * n},
                {"name": "PROBABILITIES", "datatype": "FP32", "shape": [n, 2], "data": [0.25, 0.75] * n},
            ],
        }
        with contextlib.suppress(OSError):  # the client gave up (its timeout) and closed the connection
            self._send(200, json.dumps(answer).encode(), trickle)


def _http_peer() -> Iterator[_Peer]:
    peer = _Peer("http")
    handler = type("Handler", (_KServeHTTP,), {"peer": peer})
    with http_server(handler) as served:
        peer.url = served.address
        try:
            yield peer
        finally:
            peer.release.set()  # before the server stops: its handlers wait on it


def _grpc_peer() -> Iterator[_Peer]:
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    peer = _Peer("grpc")
    Output = service_pb2.ModelInferResponse.InferOutputTensor

    class Servicer(service_pb2_grpc.GRPCInferenceServiceServicer):
        def ModelReady(self, request, context):  # noqa: N802, ANN001, ANN201 - the generated API
            return service_pb2.ModelReadyResponse(ready=request.name == MODEL)

        def ModelInfer(self, request, context):  # noqa: N802, ANN001, ANN201
            n = int(request.inputs[0].shape[0])
            peer.release.wait(peer.delay_s)
            response = service_pb2.ModelInferResponse(
                model_name=MODEL,
                outputs=[
                    Output(name="LABEL", datatype="BYTES", shape=[n, 1]),
                    Output(name="PROBABILITIES", datatype="FP32", shape=[n, 2]),
                ],
            )
            label = b"positive"
            response.raw_output_contents.append((struct.pack("<I", len(label)) + label) * n)
            response.raw_output_contents.append(struct.pack("<2f", 0.25, 0.75) * n)
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(Servicer(), server)
    peer.url = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    try:
        yield peer
    finally:
        peer.release.set()
        server.stop(grace=None).wait(10)


@pytest.fixture(params=["http", "grpc"])
def peer(request: pytest.FixtureRequest) -> Iterator[_Peer]:
    yield from (_http_peer() if request.param == "http" else _grpc_peer())


def _loadtest(peer: _Peer, out: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    cli = [sys.executable, "-m", "serving", "loadtest", "--url", peer.url, "--protocol", peer.protocol,
           "--timeout", str(TIMEOUT_S), "--concurrency", "1,2", "--requests", "2", "--warmup-requests", "0",
           "--out", str(out)]  # fmt: skip
    start = time.monotonic()
    # 60 s: the old code's 3 x SLOW_S of waiting plus start-up, so it fails by its report, not this limit.
    done = subprocess.run(cli, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - start


def test_loadtest_timeout_bounds_each_request_and_counts_it_as_an_error(peer: _Peer, tmp_path: Path) -> None:
    peer.delay_s = SLOW_S
    done, wall_s = _loadtest(peer, tmp_path / "lt.json")
    assert done.returncode == 1, (done.returncode, done.stderr)  # a load test with errors
    rows = json.loads((tmp_path / "lt.json").read_text())["results"]
    assert [(r["concurrency"], r["requests"], r["errors"]) for r in rows] == [(1, 2, 2), (2, 2, 2)], rows
    assert all(r["p50_ms"] is None and r["rps"] == 0.0 for r in rows)
    assert "2 of 2 requests failed, 2 of them without an answer within 0.5 s (--timeout)" in done.stderr
    # 3 rounds of one timeout each (1.5 s) plus start-up; one unbounded request alone would take SLOW_S.
    assert wall_s < 3 * SLOW_S - 2, wall_s


def test_http_timeout_bounds_the_whole_request_not_each_read(tmp_path: Path) -> None:
    """A peer that keeps the connection busy (a byte every TIMEOUT_S / 2) but answers after SLOW_S: before,
    the HTTP client's timeout bounded each read only, so every request took SLOW_S and counted as a success."""
    with contextlib.contextmanager(_http_peer)() as peer:
        peer.delay_s, peer.trickle_s = SLOW_S, TIMEOUT_S / 2
        done, wall_s = _loadtest(peer, tmp_path / "lt.json")
        rows = json.loads((tmp_path / "lt.json").read_text())["results"]
        assert [(r["requests"], r["errors"]) for r in rows] == [(2, 2), (2, 2)], (rows, done.stderr)
        assert done.returncode == 1, (done.returncode, done.stderr)
        assert "2 of 2 requests failed, 2 of them without an answer within 0.5 s (--timeout)" in done.stderr
        assert "RequestTimeoutError" in done.stderr, done.stderr
        assert wall_s < 3 * SLOW_S - 2, wall_s


def test_a_client_whose_http_call_timed_out_mid_answer_answers_the_next_call_whole() -> None:
    """The cut connection held half an answer: it is closed, not reused (nor its pool slot lost), so the
    same client's next call gets its own answer. Before, the trickled call was simply a 5 s success."""
    from serving.client import SentimentClient
    from serving.errors import RequestTimeoutError

    with (
        contextlib.contextmanager(_http_peer)() as peer,
        SentimentClient(peer.url, timeout_s=TIMEOUT_S, retries=0) as client,
    ):
        peer.delay_s, peer.trickle_s = SLOW_S, TIMEOUT_S / 5
        start = time.monotonic()
        with pytest.raises(RequestTimeoutError, match="within 0.5 s"):
            client.infer_raw(["first"])
        assert time.monotonic() - start < TIMEOUT_S + 1
        peer.delay_s, peer.trickle_s = 0.1, 0.01  # trickled too, but within the timeout
        labels, probabilities = client.infer_raw(["second", "third"])
        assert labels.reshape(-1).tolist() == ["positive", "positive"]
        assert probabilities.tolist() == [[0.25, 0.75], [0.25, 0.75]]


def test_answers_within_the_timeout_are_measured_not_errors(peer: _Peer, tmp_path: Path) -> None:
    """The peers' answers are valid: the slow case above fails by its timeout, not by a bad answer."""
    peer.delay_s = 0.05
    done, _ = _loadtest(peer, tmp_path / "lt.json")
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "lt.json").read_text())["results"]
    assert [(r["requests"], r["errors"]) for r in rows] == [(2, 0), (2, 0)]
    assert all(50 <= r["p50_ms"] < TIMEOUT_S * 1000 for r in rows), rows


def test_loadtest_timeout_default_is_30_s_per_request() -> None:
    from serving.__main__ import parser
    from serving.loadtest import DEFAULT_TIMEOUT_S

    assert parser().parse_args(["loadtest", "--out", "lt.json"]).timeout == DEFAULT_TIMEOUT_S == 30.0
    assert parser().parse_args(["infer", "x"]).timeout == 10.0  # the other commands keep theirs
