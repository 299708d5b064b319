"""The real tritonserver on a built repository: answers, parity with the bundle, CLI check, stop."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from serving.check import reference, run_check
from serving.client import SentimentClient
from serving.errors import PortInUseError, ServerError
from serving.loadtest import run as loadtest
from serving.server import TritonServer

pytestmark = pytest.mark.integration
TEXTS = ["what a great game last night", "my flight got cancelled again, awful", "ok"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_ensemble_answers_like_the_bundle_run_in_process(server, tiny_bundle: Path, protocol: str) -> None:
    url = server.http_url if protocol == "http" else server.grpc_url
    with SentimentClient(url, protocol=protocol) as client:  # type: ignore[arg-type]
        predictions = client.classify(TEXTS)
    labels, probabilities = reference(tiny_bundle, TEXTS)
    assert [p.label for p in predictions] == labels
    for pred, row in zip(predictions, probabilities, strict=True):
        assert pred.probabilities == pytest.approx(row, abs=1e-4)


def _metric(server: TritonServer, name: str, model: str = "sentiment", version: str = "2") -> float:
    with urllib.request.urlopen(server.metrics_url, timeout=5) as resp:
        lines = resp.read().decode().splitlines()
    prefix = f'{name}{{model="{model}",version="{version}"}} '
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix))


def test_a_request_whose_client_gave_up_is_dropped_from_the_queue_not_run(server) -> None:
    """Before: Triton ran every queued request of a client that had timed out or disconnected. A burst of
    them (clients retrying after their timeout) left the endpoint working for nobody: 20 s of such clients
    queued ~1,900 requests and live clients timed out for the next half hour."""
    import threading
    import time

    from serving.errors import RequestTimeoutError

    # 64 texts = max_batch_size: nothing joins this batch, and it keeps the one instance busy for seconds.
    heavy = ["word " * 13_000] * 64
    done = _metric(server, "nv_inference_count")
    with SentimentClient(server.grpc_url, protocol="grpc", timeout_s=120) as busy:
        worker = threading.Thread(target=busy.classify, args=(heavy,))
        worker.start()
        time.sleep(0.25)  # the heavy batch (~1 s alone on 2 cores) runs: what follows queues behind it
        with (
            SentimentClient(server.http_url, timeout_s=0.2, retries=0) as impatient,
            pytest.raises(RequestTimeoutError),
        ):
            impatient.classify(["thanks for the kind words"])
        worker.join(timeout=120)
    assert not worker.is_alive()
    with SentimentClient(server.http_url) as client:  # the server goes on serving
        assert client.classify(["fine"])[0].label in ("negative", "positive")
    # Executed inferences: the heavy batch and the last request, not the abandoned one.
    assert _metric(server, "nv_inference_count") - done == 64 + 1


def test_previous_version_stays_loaded_and_addressable(server) -> None:
    # served_repo: version 1 = int8, version 2 = fp32 (latest).
    import tritonclient.http as http

    client = http.InferenceServerClient(server.http_url)
    assert client.is_model_ready("classifier", "1") and client.is_model_ready("classifier", "2")
    assert client.is_model_ready("sentiment", "2")


def test_check_passes_against_the_bundle_and_fails_on_a_wrong_answer(server, tiny_bundle: Path) -> None:
    with SentimentClient(server.http_url) as client:
        assert run_check(client, bundle=tiny_bundle) == []
        said = client.classify(["I love it"])[0].label
        wrong = "positive" if said == "negative" else "negative"
        problems = run_check(client, expectations=[("I love it", wrong)])
    assert problems and f"expected {wrong}, got {said}" in problems[0]

    cli = [sys.executable, "-m", "serving", "check", "--url", server.grpc_url, "--protocol", "grpc"]
    ok = subprocess.run([*cli, "--bundle", str(tiny_bundle)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([*cli, "--expect", f"I love it={wrong}"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "FAIL" in bad.stderr


def test_loadtest_report_has_the_contract_shape(server, tmp_path: Path) -> None:
    report = loadtest(server.grpc_url, TEXTS, concurrencies=(1, 4), requests=24, warmup_requests=2)
    assert [r["concurrency"] for r in report["results"]] == [1, 4]
    for row in report["results"]:
        assert row["requests"] == 24 and row["errors"] == 0 and row["rps"] > 0
        assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
    out = tmp_path / "lt.json"
    cli = [sys.executable, "-m", "serving", "loadtest", "--url", server.http_url, "--concurrency", "2"]
    done = subprocess.run(
        [*cli, "--requests", "10", "--out", str(out)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    saved = json.loads(out.read_text())
    assert set(saved) >= {"url", "model", "results"} and saved["results"][0]["requests"] == 10


def test_a_port_of_the_wrong_kind_is_exit_2_naming_the_port_to_pass(server, tiny_bundle: Path) -> None:
    """Before: the HTTP client on the gRPC port (`infer --url 127.0.0.1:8001`, the loadtest example's port)
    died in a geventhttpclient traceback, exit 1 (a wrong answer, by the README's codes); `pin --url` did
    so after pinning the repository on disk; `check` waited its whole minute; on the metrics port the
    error was a bare "Method Not Allowed"."""
    import time

    from serving.errors import UnavailableError

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "serving", *args], capture_output=True, text=True, timeout=120
        )

    on_grpc = cli("infer", "fine", "--url", server.grpc_url)
    assert on_grpc.returncode == 2, on_grpc.stderr
    assert "Traceback" not in on_grpc.stderr
    assert f"{server.grpc_url} does not answer HTTP" in on_grpc.stderr and "--protocol grpc" in on_grpc.stderr
    started = time.monotonic()
    check = cli("check", "--url", server.grpc_url, "--bundle", str(tiny_bundle))
    assert check.returncode == 2 and "is it Triton's gRPC port?" in check.stderr, check.stderr
    assert time.monotonic() - started < 30  # not the 60 s wait for a server still starting
    metrics_port = server.metrics_url.split("//", 1)[1].split("/", 1)[0]
    on_metrics = cli("infer", "fine", "--url", metrics_port)
    assert on_metrics.returncode == 2 and "metrics port" in on_metrics.stderr, on_metrics.stderr
    with SentimentClient(server.grpc_url) as client, pytest.raises(UnavailableError, match="gRPC port"):
        client.load_models(["sentiment"])  # what `pin --url` calls
    grpc_on_http = SentimentClient(server.http_url, protocol="grpc", retries=0)
    with grpc_on_http, pytest.raises(UnavailableError, match=f"is {server.http_url} its grpc port"):
        grpc_on_http.classify(["fine"])


def _requests_served(server: TritonServer) -> float:
    with urllib.request.urlopen(server.metrics_url, timeout=5) as resp:
        lines = resp.read().decode().splitlines()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("nv_inference_request_success{")
    )


def test_a_loadtest_report_path_that_cannot_be_written_is_refused_before_any_load(
    server, tmp_path: Path
) -> None:
    """Before: the whole sweep ran, then writing the report failed (IsADirectoryError traceback, exit 1)."""
    (tmp_path / "reports").mkdir()
    served = _requests_served(server)
    done = subprocess.run(
        [sys.executable, "-m", "serving", "loadtest", "--url", server.http_url, "--concurrency", "1,2",
         "--requests", "20", "--out", str(tmp_path / "reports")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--out {tmp_path / 'reports'} is a folder: pass a file path" in done.stderr
    assert _requests_served(server) == served  # no request sent, so none measured and lost


def test_a_busy_port_is_a_clear_error(served_repo: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"http port {port} .* already in use: pass --http-port"):
            TritonServer(served_repo, http_port=port, grpc_port=0, metrics_port=0).start()
        cli = [sys.executable, "-m", "serving", "serve", str(served_repo), "--grpc-port", str(port)]
        done = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "--grpc-port" in done.stderr


def _taken_after_the_check(monkeypatch: pytest.MonkeyPatch, server: TritonServer) -> socket.socket:
    """A listener on the server's metrics port that appears after start()'s own port check passed."""
    import serving.server

    taken = socket.socket()
    taken.bind(("127.0.0.1", server.metrics_port))
    taken.listen()
    calls = iter(range(1_000))
    real = serving.server._check_port
    # The first attempt's three checks pass; later ones check for real.
    monkeypatch.setattr(serving.server, "_check_port", lambda *a: None if next(calls) < 3 else real(*a))
    return taken


def test_metrics_port_taken_after_the_check_is_not_reported_ready(
    served_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Triton answers /v2/health/ready ~40 ms before it binds /metrics, then exits 1 if the bind fails.
    from localservers import free_port

    # Ports the caller chose are not re-picked: the error is theirs to act on.
    server = TritonServer(served_repo, http_port=free_port(), grpc_port=free_port(), metrics_port=free_port())
    with _taken_after_the_check(monkeypatch, server), pytest.raises(ServerError, match="could not bind"):
        server.start()
    assert server.process is None


def test_a_picked_port_taken_meanwhile_is_picked_again(
    served_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = TritonServer(served_repo, http_port=0, grpc_port=0, metrics_port=0)
    first = server.metrics_port
    with _taken_after_the_check(monkeypatch, server), server:
        assert server.metrics_port != first
        with urllib.request.urlopen(server.metrics_url, timeout=5) as resp:
            assert b"nv_inference_count" in resp.read()


def test_serve_cli_prints_endpoints_and_stops_cleanly_on_ctrl_c(served_repo: Path) -> None:
    import signal

    from tests.serving.serve_cli import serve_cli

    with serve_cli(served_repo) as serve:
        printed = "".join(serve.lines)
        assert serve.http_url.startswith("127.0.0.1:") and "gRPC    127.0.0.1:" in printed, printed
        assert "metrics http://127.0.0.1:" in printed, printed
        with SentimentClient(serve.http_url) as client:  # the printed endpoint is the one serving
            assert client.classify(["fine"])[0].label in ("negative", "positive")
        serve.proc.send_signal(signal.SIGINT)
        assert serve.proc.wait(timeout=60) == 0
    with socket.socket() as s:  # the server is gone: nobody listens on its port any more
        assert s.connect_ex(("127.0.0.1", serve.http_port)) != 0


def test_a_test_failing_inside_serve_cli_leaves_no_server_behind(served_repo: Path) -> None:
    """The shared helper stops the CLI in order (SIGTERM, as Ctrl-C), so its tritonserver and the python backend
    stubs are gone when the `with` ends. Before, a failing test SIGKILLed the CLI alone: its server went on
    until the watchdog noticed, and on picked ports another test could meet."""
    import psutil

    from tests.serving.serve_cli import serve_cli

    with pytest.raises(RuntimeError, match="the test failed"), serve_cli(served_repo) as serve:
        family = psutil.Process(serve.proc.pid).children(recursive=True)
        assert any(p.name() == "tritonserver" for p in family), family
        raise RuntimeError("the test failed")
    _, alive = psutil.wait_procs(family, timeout=1)
    assert not alive, alive
    assert serve.proc.returncode == 0  # serve's own orderly stop, not a kill


def test_a_model_that_fails_to_load_is_named_in_the_start_error(tiny_bundle: Path, tmp_path: Path) -> None:
    """Triton logs the reason once, then a long table and its shutdown: the error must carry the reason."""
    from serving.errors import ServerError
    from serving.repository import build

    repo = tmp_path / "models"
    build(tiny_bundle, repo)
    (repo / "sentiment" / "1" / "model.onnx").write_bytes(b"damaged on disk after the build")
    with pytest.raises(ServerError) as info:
        TritonServer(repo, http_port=0, grpc_port=0, metrics_port=0).start()
    message = str(info.value)
    assert "models failed to load" in message and "`serving pin` a good one" in message
    assert "failed to load 'sentiment' version 1: " in message and "INVALID_PROTOBUF" in message
    assert "failed to load 'classifier'" not in message  # only the broken model is named


def test_a_config_triton_cannot_parse_is_named_with_the_reason(tiny_bundle: Path, tmp_path: Path) -> None:
    """Before: "tritonserver exited with code 1" and a log tail of tables: protobuf's reason and the file sat
    above it. A hand-edited config (e.g. to change max_batch_size) is the usual cause."""
    from serving.repository import build

    repo = tmp_path / "models"
    build(tiny_bundle, repo)
    config = repo / "sentiment" / "config.pbtxt"
    config.write_text(config.read_text().replace("max_batch_size: 64", "max_batch_sise: 64"))
    with pytest.raises(ServerError) as info:
        TritonServer(repo, http_port=0, grpc_port=0, metrics_port=0).start()
    message = str(info.value)
    assert f"model 'sentiment': failed to read text proto from {config.resolve()}: 4:15: " in message
    assert 'has no field named "max_batch_sise"' in message
    assert f"python -m serving pin {repo.resolve()} latest" in message


def test_a_production_repository_served_locally_says_to_build_with_the_python_backend(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    from serving.repository import BuildOptions, build

    repo = tmp_path / "models"
    build(tiny_bundle, repo, options=BuildOptions(backend="onnxruntime"))
    with pytest.raises(ServerError) as info:
        TritonServer(repo, http_port=0, grpc_port=0, metrics_port=0).start()
    message = str(info.value)
    assert "unable to find backend library for backend 'onnxruntime'" in message
    assert "was built with --backend onnxruntime" in message and "--backend python" in message


def test_a_repository_path_with_spaces_is_refused_before_starting(tmp_path: Path) -> None:
    # Triton's python backend starts model stubs with the path unquoted (python_backend#401): on a real
    # server the models never load and `start` used to wait out its ready timeout. An empty repository
    # becomes ready, so the old code started a server here: the refusal must come first.
    repo = tmp_path / "my models"
    repo.mkdir()
    from localservers import free_port

    server = TritonServer(repo, http_port=free_port(), grpc_port=free_port(), metrics_port=free_port())
    try:
        with pytest.raises(ServerError, match="whitespace in its path"):
            server.start()
        assert server.process is None
    finally:
        server.stop()
