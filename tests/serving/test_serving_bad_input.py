"""Bad input against the real server: a clear per-request error, and the server keeps serving."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from localservers import free_port
from serving.client import SentimentClient
from serving.errors import InferenceError, UnavailableError

pytestmark = pytest.mark.integration
GOOD = "thanks for the kind words"


@pytest.fixture(scope="module")
def clients(server):
    with (
        SentimentClient(server.http_url) as http,
        SentimentClient(server.grpc_url, protocol="grpc") as grpc,
    ):
        yield {"http": http, "grpc": grpc}


@pytest.fixture(params=["http", "grpc"])
def client(request, clients) -> SentimentClient:
    c = clients[request.param]
    yield c
    # After every bad request the same server still answers a good one.
    assert c.classify([GOOD])[0].label in ("negative", "positive")


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ([""], "TEXT\\[0\\] is empty"),
        (["   \n\t"], "TEXT\\[0\\] is empty"),
        ([GOOD, b"caf\xc3\xa9 \xff\xfe broken"], "TEXT\\[1\\] is not valid UTF-8"),
        (["x" * 70_000], "70000 bytes; the limit is 65536"),
        # The tokenizer drops these characters: before, each got the same answer, that of [CLS] [SEP] alone.
        (["\x00"], "TEXT\\[0\\] has no characters the model reads"),
        ([GOOD, "\u200b\ufeff\x01"], "TEXT\\[1\\] has no characters the model reads"),
    ],
    ids=["empty", "whitespace", "invalid-utf8", "over-byte-limit", "nul", "zero-width-and-control"],
)
def test_bad_texts_get_a_per_request_error(client: SentimentClient, texts, message: str) -> None:
    before = client.attempts
    with pytest.raises(InferenceError, match=message) as info:
        client.classify(texts)
    assert not isinstance(info.value, UnavailableError)
    assert client.attempts == before + 1  # a bad input is never retried


def test_non_utf8_command_line_text_gets_the_servers_error_not_a_crash(server) -> None:
    import subprocess
    import sys

    # A Latin-1 terminal or `xargs` over a Latin-1 file: Python holds the byte as a lone surrogate.
    cmd = [sys.executable, "-m", "serving", "infer", GOOD, b"caf\xe9 ouvert", "--url", server.http_url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "TEXT[1] is not valid UTF-8 (invalid continuation byte at byte 3)" in done.stderr


def test_very_long_text_is_truncated_not_refused(client: SentimentClient) -> None:
    head = "the service was fine and the food arrived on time " * 3
    long = head + "but then everything went wrong " * 500  # ~16 KB, far past max_length=32 tokens
    a, b = client.classify([long, head + "and something else entirely " * 400])
    # Both truncate to the same first 32 tokens, so the model sees identical inputs.
    assert a == b


def test_control_characters_inside_a_text_are_dropped_not_refused(client: SentimentClient) -> None:
    # The tokenizer removes them, as it did for the training data: same input to the model, same answer.
    assert client.classify(["thanks\x00 for the\u200b kind words"]) == client.classify([GOOD])


def test_no_texts_is_no_answers_not_the_servers_puzzling_error(client: SentimentClient) -> None:
    # Before: Triton's "expected 1 string elements for inference input 'TEXT' ..., got 0" (an InferenceError).
    sent = client.attempts
    assert client.classify([]) == []
    assert client.attempts == sent  # nothing to ask the server


def test_batch_over_max_batch_size_is_refused(client: SentimentClient) -> None:
    with pytest.raises(InferenceError, match="batch-size must be <= 64"):
        client.classify([GOOD] * 65)
    assert len(client.classify([GOOD] * 64)) == 64


def test_wrong_dtype_and_shape_are_refused_by_the_server(server) -> None:
    import tritonclient.grpc as grpc
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    for module, url in ((http, server.http_url), (grpc, server.grpc_url)):
        c = module.InferenceServerClient(url)
        ints = module.InferInput("TEXT", [1, 1], "INT64")
        ints.set_data_from_numpy(np.array([[7]], dtype=np.int64))
        with pytest.raises(InferenceServerException, match="(?i)data type|datatype|TYPE_STRING|BYTES"):
            c.infer("sentiment", [ints])
        wide = module.InferInput("TEXT", [1, 2], "BYTES")
        wide.set_data_from_numpy(np.array([[b"a", b"b"]], dtype=object))
        with pytest.raises(InferenceServerException, match="(?i)shape"):
            c.infer("sentiment", [wide])
        c.close()


def test_a_bad_request_does_not_fail_good_ones_batched_with_it(server) -> None:
    """Concurrent good and bad requests land in the same dynamic batch; only the bad ones fail."""
    outcomes: dict[str, list[str]] = {"good": [], "bad": []}
    lock = threading.Lock()

    def send(kind: str) -> None:
        with SentimentClient(server.grpc_url, protocol="grpc") as c:
            for n in range(6):
                # Both refusals: before tokenizing (empty) and after it (only characters the tokenizer drops).
                try:
                    c.classify([GOOD if kind == "good" else ("", "\x00")[n % 2]])
                    result = "ok"
                except InferenceError:
                    result = "error"
                with lock:
                    outcomes[kind].append(result)

    threads = [threading.Thread(target=send, args=(k,)) for k in ("good", "bad") * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes["good"] == ["ok"] * 24
    assert outcomes["bad"] == ["error"] * 24


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_unreachable_server_is_retried_with_backoff_then_reported(protocol: str) -> None:
    port = free_port()  # nobody listens here
    client = SentimentClient(f"127.0.0.1:{port}", protocol=protocol, retries=2, backoff_s=0.1, timeout_s=2)  # type: ignore[arg-type]
    start = time.monotonic()
    with pytest.raises(UnavailableError, match=f"\\({protocol}\\) unavailable after 3 attempts"):
        client.classify([GOOD])
    assert client.attempts == 3
    assert time.monotonic() - start >= 0.1 + 0.2  # backoff doubled between attempts
    client.close()
