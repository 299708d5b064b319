"""What tritonserver does with SIGTERM: the evidence for the Deployment's preStop hook and grace period.

Kubernetes stops a pod (HPA/KEDA scale-down, a rollout, a node drain) by sending SIGTERM while it removes the
pod from the Service's endpoints; kube-proxy and ingress controllers keep routing new connections to it for
seconds. Measured here on the real tritonserver (2.51, the nvidia-pytriton wheel), with a python-backend
model that sleeps as long as each request asks:
- new HTTP connections are refused at once, inference and /v2/health/ready alike: every request routed to a
  pod that got SIGTERM before its endpoints converged fails, so the pod must keep serving (preStop) first;
- an HTTP keep-alive connection opened before SIGTERM is still served, and Triton waits for it to close
  (idle clients' pools rarely do) up to --exit-timeout-secs; in-flight requests finish;
- the exit timeout is one budget for open connections, in-flight inferences and model unload: Triton exits
  at most about a second past it, cutting what is still running. The grace period must cover
  preStop + exit timeout + slack (infra/k8s/serving.py), or SIGKILL cuts in-flight requests instead.
"""

from __future__ import annotations

import http.client
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from infra.k8s.serving import SHUTDOWN_SLACK_S
from serving.server import TritonServer
from tests.serving.conftest import tritonserver_missing

pytestmark = pytest.mark.integration
EXIT_TIMEOUT_S = 4  # short, to keep the test fast; the image sets its own (containers/serving/Dockerfile)
IN_FLIGHT_S = 2.0  # shorter than the exit timeout: finishes
TOO_LONG_S = EXIT_TIMEOUT_S + 6.0  # longer than it: cut at exit

CONFIG = """
name: "slow"
backend: "python"
max_batch_size: 0
input [ { name: "DELAY_S", data_type: TYPE_FP32, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ 1 ] } ]
instance_group [ { count: 3, kind: KIND_CPU } ]
"""
MODEL = """
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_S").as_numpy()
            time.sleep(float(delay[0]))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", delay)]))
        return responses
"""


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[TritonServer]:
    reason = tritonserver_missing()
    if reason:
        pytest.skip(reason)
    model = tmp_path / "models" / "slow"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG)
    (model / "1" / "model.py").write_text(MODEL)
    # Later flags win: this overrides TritonServer's own --exit-timeout-secs.
    args = (f"--exit-timeout-secs={EXIT_TIMEOUT_S}",)
    with TritonServer(
        tmp_path / "models", http_port=0, grpc_port=0, metrics_port=0, extra_args=args
    ) as server:
        yield server


def _connection(server: TritonServer) -> http.client.HTTPConnection:
    host, port = server.http_url.rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=60)


def _infer(conn: http.client.HTTPConnection, delay_s: float, keep_alive: bool = True) -> int:
    body = json.dumps({"inputs": [{"name": "DELAY_S", "shape": [1], "datatype": "FP32", "data": [delay_s]}]})
    headers = {"Content-Type": "application/json", "Connection": "keep-alive" if keep_alive else "close"}
    conn.request("POST", "/v2/models/slow/infer", body, headers)
    response = conn.getresponse()
    response.read()
    return response.status


def _new_connection_answers(server: TritonServer, path: str) -> bool:
    conn = _connection(server)
    try:
        if path == "infer":
            return _infer(conn, 0.0, keep_alive=False) == 200
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except OSError:  # refused, reset, closed without a response
        return False
    finally:
        conn.close()


def _in_background(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = call()
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test reads
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def _grpc_infer(server: TritonServer, delay_s: float) -> float:
    import tritonclient.grpc as grpc

    client = grpc.InferenceServerClient(server.grpc_url)
    try:
        tensor = grpc.InferInput("DELAY_S", [1], "FP32")
        tensor.set_data_from_numpy(np.array([delay_s], dtype=np.float32))
        return float(client.infer("slow", [tensor], client_timeout=60).as_numpy("OUT")[0])
    finally:
        client.close()


def test_sigterm_refuses_new_connections_at_once_and_exits_within_the_exit_timeout(
    slow_server: TritonServer,
) -> None:
    server = slow_server
    assert server.process is not None
    keep_alive = _connection(server)
    assert _infer(keep_alive, 0.0) == 200
    assert _new_connection_answers(server, "/v2/health/ready")
    http_call, http_result = _in_background(
        lambda: _infer(_connection(server), IN_FLIGHT_S, keep_alive=False)
    )
    grpc_call, grpc_result = _in_background(lambda: _grpc_infer(server, IN_FLIGHT_S))
    long_call, long_result = _in_background(lambda: _infer(_connection(server), TOO_LONG_S, keep_alive=False))
    time.sleep(0.5)  # all three are executing (one model instance each)

    sigterm = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    # What kube-proxy still routes to the pod, and what the kubelet's readiness probe sees.
    assert not _new_connection_answers(server, "infer"), "a new HTTP connection was served after SIGTERM"
    assert not _new_connection_answers(server, "/v2/health/ready"), "readiness answered after SIGTERM"
    assert server.process.poll() is None
    # A connection opened before SIGTERM is still served (clients with pools keep using the stopping pod).
    assert _infer(keep_alive, 0.0) == 200

    http_call.join(IN_FLIGHT_S + 5)
    grpc_call.join(IN_FLIGHT_S + 5)
    assert http_result == {"value": 200}
    assert grpc_result == {"value": IN_FLIGHT_S}

    # The open keep-alive connection holds Triton for the whole exit timeout, then it exits regardless.
    server.process.wait(EXIT_TIMEOUT_S + 30)
    exited_after = time.monotonic() - sigterm
    assert EXIT_TIMEOUT_S - 0.5 <= exited_after <= EXIT_TIMEOUT_S + SHUTDOWN_SLACK_S, exited_after
    long_call.join(10)
    assert isinstance(long_result.get("error"), OSError), (
        f"a request longer than the exit timeout: {long_result}"
    )
    keep_alive.close()
