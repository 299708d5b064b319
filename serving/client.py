"""Client for the `sentiment` endpoint over tritonclient HTTP or gRPC.

    client = SentimentClient("127.0.0.1:8000")            # HTTP
    client = SentimentClient("127.0.0.1:8001", protocol="grpc")
    client.classify(["what a lovely day"])  # -> [Prediction(label="positive", probabilities=(0.03, 0.97))]

Every call has a timeout, bounding the whole call: gRPC's deadline, and over HTTP a deadline of our own
around it (tritonclient's HTTP timeouts bound each socket operation only, so a server trickling its answer
kept a call going far past it). Only "the server is not there right now" (connection refused/reset,
HTTP 502/503/504, gRPC UNAVAILABLE) is retried, with exponential backoff: a rolling restart or a
pod still loading models heals by waiting, a bad input never does, so it fails at once.
A tritonclient HTTP client is not thread-safe: use one SentimentClient per thread.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from serving.errors import InferenceError, RequestTimeoutError, UnavailableError

Protocol = Literal["http", "grpc"]
T = TypeVar("T")
RETRYABLE_STATUS = {"StatusCode.UNAVAILABLE", "502", "503", "504"}
TIMEOUT_STATUS = "StatusCode.DEADLINE_EXCEEDED"
QUEUE_TIMEOUT_MESSAGE = "Request timeout expired"  # Triton's dynamic batcher, queue policy REJECT


@dataclass(frozen=True, slots=True)
class Prediction:
    label: str
    probabilities: tuple[float, ...]

    @property
    def confidence(self) -> float:
        return max(self.probabilities)


def _encode(text: str | bytes) -> bytes:
    # bytes pass through untouched so callers (and tests) can send exactly what they mean.
    if isinstance(text, bytes):
        return text
    try:
        # Python decodes non-UTF-8 argv/file bytes to lone surrogates: send the original bytes back out,
        # so the server's per-text "not valid UTF-8 ... at byte N" names the problem, not a local crash.
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # other lone surrogates: still invalid UTF-8 for the server to refuse
        return text.encode("utf-8", "surrogatepass")


def is_timeout(exc: BaseException) -> bool:
    """gRPC's deadline, the HTTP client's socket timeout (geventhttpclient raises TimeoutError), or Triton
    dropping a request that waited in its queue past its timeout (503 / UNAVAILABLE, but not retryable:
    the server was there and overloaded)."""
    from tritonclient.utils import InferenceServerException

    if isinstance(exc, InferenceServerException):
        return str(exc.status()) == TIMEOUT_STATUS or QUEUE_TIMEOUT_MESSAGE in str(exc.message())
    return isinstance(exc, TimeoutError)


def is_retryable(exc: BaseException) -> bool:
    from tritonclient.utils import InferenceServerException

    if isinstance(exc, InferenceServerException):
        return str(exc.status()) in RETRYABLE_STATUS and not is_timeout(exc)
    # Refused/reset only: a timeout may mean an overloaded server, and retrying would add to its load.
    return isinstance(exc, ConnectionError)


def wrong_port(exc: BaseException, url: str, protocol: str) -> str | None:
    """What to fix when `url` answered, but not as Triton's inference API for `protocol`, else None.

    The usual cause is a port mix-up (HTTP 8000, gRPC 8001, metrics 8002). It never heals by waiting: a
    gRPC port sent HTTP answers bytes that are no HTTP (tritonclient's parser raised it as a traceback),
    and the metrics port answers 405 to the API's POSTs."""
    from tritonclient.utils import InferenceServerException

    # A peer that accepts and then closes (a port-forward to a restarting pod, a proxy before a Triton that
    # is still starting) raises HTTPConnectionClosed, an HTTPException too: that one heals by waiting.
    if (
        protocol == "http"
        and isinstance(exc, http.client.HTTPException)
        and type(exc).__name__ != "HTTPConnectionClosed"
    ):
        return (
            f"{url} does not answer HTTP ({exc!r}): is it Triton's gRPC port? Pass its HTTP port "
            "(8000 by default) or --protocol grpc"
        )
    if isinstance(exc, InferenceServerException) and str(exc.status()) == "405":
        return (
            f"{url} answered 405 Method Not Allowed: it is not Triton's inference API (its metrics port, "
            "8002 by default?); pass the HTTP port (8000 by default) or the gRPC port with --protocol grpc"
        )
    return None


class SentimentClient:
    def __init__(
        self,
        url: str,
        *,
        protocol: Protocol = "http",
        model: str = "sentiment",
        version: str = "",
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 0.2,
    ) -> None:
        if protocol not in ("http", "grpc"):
            raise ValueError(f"protocol {protocol!r}: use http or grpc")
        if retries < 0 or backoff_s < 0 or timeout_s <= 0:
            raise ValueError("retries and backoff_s must be >= 0, timeout_s > 0")
        self.url, self.protocol, self.model, self.version = (
            url.removeprefix("http://"),
            protocol,
            model,
            version,
        )
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.attempts = 0  # calls sent, retries included: lets callers (and tests) see the retry policy work
        self._last_error: BaseException | None = None  # of is_ready: lets wait_ready stop on a wrong port
        if protocol == "http":
            import tritonclient.http as tc

            self._tc: Any = tc
            self._client: Any = tc.InferenceServerClient(
                self.url, connection_timeout=timeout_s, network_timeout=timeout_s
            )
        else:
            import tritonclient.grpc as tc

            self._tc = tc
            self._client = tc.InferenceServerClient(self.url)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> SentimentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bounded(self, fn: Callable[[], T]) -> T:
        """Run one HTTP call under a deadline for the whole call (gRPC calls pass their own deadline).

        The HTTP client is gevent's: a gevent.Timeout is thrown into it at its next socket wait. It throws a
        TimeoutError, which geventhttpclient already handles as the socket timeout it is: it closes the
        socket instead of returning it to its pool with half an answer in it. The timer costs microseconds.
        """
        if self.protocol == "grpc":
            return fn()
        import gevent

        with gevent.Timeout(self.timeout_s, TimeoutError(f"no answer within {self.timeout_s:g} s")):
            return fn()

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        from tritonclient.utils import InferenceServerException

        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            self.attempts += 1
            try:
                return self._bounded(fn)
            except Exception as exc:  # noqa: BLE001 - sorted into retryable / not below
                if not is_retryable(exc):
                    if is_timeout(exc):
                        raise RequestTimeoutError(
                            f"{what}: no answer from {self.url} ({self.protocol}) within {self.timeout_s:g} s "
                            "(server overloaded or stuck?): retry later or raise the timeout (--timeout)"
                        ) from exc
                    wrong = wrong_port(exc, self.url, self.protocol)
                    if wrong:
                        raise UnavailableError(f"{what}: {wrong}") from exc
                    if isinstance(exc, InferenceServerException):
                        raise InferenceError(f"{what}: {exc.message()}") from exc
                    raise
                if attempt == self.retries:
                    raise UnavailableError(
                        f"{what}: server at {self.url} ({self.protocol}) unavailable after "
                        f"{self.retries + 1} attempts: {exc}. Is it running (`python -m serving serve`), and is "
                        f"{self.url} its {self.protocol} port (HTTP 8000, gRPC 8001 by default)?"
                    ) from exc
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def is_ready(self) -> bool:
        self._last_error = None
        try:
            if self.protocol == "grpc":
                return bool(
                    self._client.is_model_ready(self.model, self.version, client_timeout=self.timeout_s)
                )
            return bool(self._bounded(lambda: self._client.is_model_ready(self.model, self.version)))
        except Exception as exc:  # noqa: BLE001 - not reachable is "not ready"
            self._last_error = exc
            return False

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.is_ready():
            wrong = self._last_error and wrong_port(self._last_error, self.url, self.protocol)
            if wrong:  # waiting would not help: `check` used to wait its whole minute on a gRPC port
                raise UnavailableError(f"model {self.model}: {wrong}")
            if time.monotonic() > deadline:
                raise UnavailableError(
                    f"model {self.model} at {self.url} ({self.protocol}) not ready after {timeout_s:.0f} s: "
                    "is the server running (`python -m serving serve`) and are --url/--protocol its port?"
                )
            time.sleep(0.25)

    def infer_raw(self, texts: Sequence[str | bytes]) -> tuple[Any, Any]:
        """(LABEL, PROBABILITIES) numpy arrays for `texts`, one request."""
        import numpy as np

        array = np.array([[_encode(t)] for t in texts], dtype=object).reshape(len(texts), 1)
        tc = self._tc
        text = tc.InferInput("TEXT", list(array.shape), "BYTES")
        text.set_data_from_numpy(array)
        outputs = [tc.InferRequestedOutput("LABEL"), tc.InferRequestedOutput("PROBABILITIES")]
        # The same bound for the server: once we stop waiting, a request still in the endpoint's queue is
        # dropped instead of run for nobody (its config allows the override: serving/config.py DynamicBatching).
        timeout_us = max(1, int(self.timeout_s * 1_000_000))
        kwargs: dict[str, Any] = {"model_version": self.version, "outputs": outputs, "timeout": timeout_us}
        if self.protocol == "grpc":
            kwargs["client_timeout"] = self.timeout_s
        result = self._call(f"infer {self.model}", lambda: self._client.infer(self.model, [text], **kwargs))
        return result.as_numpy("LABEL"), result.as_numpy("PROBABILITIES")

    def classify(self, texts: Sequence[str | bytes]) -> list[Prediction]:
        if not texts:  # Triton would answer "expected 1 string elements ... got 0" to an empty batch
            return []
        labels, probabilities = self.infer_raw(texts)
        return [
            Prediction(label=label.decode("utf-8"), probabilities=tuple(float(p) for p in row))
            for label, row in zip(labels.reshape(-1), probabilities, strict=True)
        ]

    def ready_versions(self, name: str) -> list[int]:
        """The versions of `name` the server has READY (its repository index), ascending."""
        index = self._call("repository index", lambda: self._client.get_model_repository_index())
        rows = index if self.protocol == "http" else [
            {"name": m.name, "version": m.version, "state": m.state} for m in index.models
        ]  # fmt: skip
        return sorted(int(r["version"]) for r in rows if r.get("name") == name and r.get("state") == "READY")

    def load_models(self, names: Sequence[str]) -> None:
        """(Re)load models in explicit model-control mode, e.g. after `serving pin`."""
        for name in names:
            self._call(f"load {name}", lambda name=name: self._client.load_model(name))  # type: ignore[misc]
