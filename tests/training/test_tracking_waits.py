"""One MLflow call to a dead tracking server blocks rank 0 for well under the process-group timeout.

Before, MLflow's own HTTP defaults applied (7 retries, backoff factor 2, 120 s per attempt): ~4 min on a refused
connection, ~20 min on one that never answers. In a multi-process run the other ranks gave up in their next
collective after TRAINING_PG_TIMEOUT_S (120 s), exit 75, and each resumed attempt waited again. Checked here: the
bound against urllib3's own Retry as MLflow builds it, and real calls of the Tracker against a port nobody listens
on and a listener that accepts and never answers.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from training import tracking
from training.tracking import HttpWaits, Tracker, TrackingError

HTTP_VARS = (
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER",
    "MLFLOW_HTTP_REQUEST_TIMEOUT",
    "MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER",
)


@pytest.fixture
def unset(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No MLflow HTTP setting of the user's, single process, the default process-group timeout."""
    for name in (*HTTP_VARS, "TRAINING_PG_TIMEOUT_S", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def urllib3_worst_case_s(retries: int, factor: int, jitter: float, timeout_s: float) -> float:
    """The same wait from urllib3 itself: the Retry object MLflow mounts on its session, failed until it gives up,
    its sleeps summed with the jitter at its maximum, and two timeouts (connect, read) per attempt."""
    from unittest import mock

    from mlflow.utils.request_utils import _TRANSIENT_FAILURE_RESPONSE_CODES, _get_request_session
    from urllib3.exceptions import ConnectTimeoutError, MaxRetryError

    session = _get_request_session(retries, factor, jitter, _TRANSIENT_FAILURE_RESPONSE_CODES, True, False)
    retry = session.get_adapter("http://mlflow.example").max_retries
    attempts, slept = 1, 0.0
    with mock.patch("random.random", return_value=1.0):
        while True:
            try:
                retry = retry.increment(method="GET", url="/api", error=ConnectTimeoutError("dead"))
            except MaxRetryError:
                break
            attempts += 1
            slept += retry.get_backoff_time()
    return attempts * 2 * timeout_s + slept


def test_the_defaults_keep_one_call_within_a_third_of_the_process_group_timeout(
    unset: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import os

    waits = tracking.bound_http_waits()
    assert [os.environ[n] for n in HTTP_VARS] == ["2", "1", "1.0", "6", "false"]  # what MLflow reads
    assert waits == HttpWaits(retries=2, backoff_factor=1, jitter=1.0, timeout_s=6, retry_after=False)
    # 3 attempts x (6 s connect + 6 s read) + 0 + (1 x 2 + 1) s of backoff: 39 s, against a 120 s timeout.
    assert waits.worst_case_s() == 39.0 <= 120 / 3
    assert waits.worst_case_s() == urllib3_worst_case_s(2, 1, 1.0, 6)
    # MLflow's own defaults through the same formula (the backoff capped at 120 s): far past the timeout.
    assert HttpWaits(7, 2, 1.0, 120, True).worst_case_s() == urllib3_worst_case_s(7, 2, 1.0, 120) > 1000
    for pg_timeout_s in (6, 10, 30, 60, 120, 300, 1800):  # a lowered or raised TRAINING_PG_TIMEOUT_S follows
        default = tracking.default_http_waits(pg_timeout_s)
        assert default.worst_case_s() <= pg_timeout_s / 3, (pg_timeout_s, default)
        assert default.worst_case_s() == urllib3_worst_case_s(
            default.retries, int(default.backoff_factor), default.jitter, default.timeout_s
        )


def test_the_users_values_win_and_a_wait_past_the_timeout_is_named(
    unset: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import os

    unset.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "7")
    unset.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "120")
    with caplog.at_level(logging.WARNING, logger="training.tracking"):
        waits = tracking.bound_http_waits()  # one process: no collective waits for it, nothing to say
    assert (waits.retries, waits.timeout_s, os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]) == (7, 120, "7")
    assert os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] == "1"  # the ones left unset still get defaults
    assert not caplog.records
    unset.setenv("WORLD_SIZE", "2")
    with caplog.at_level(logging.WARNING, logger="training.tracking"):
        tracking.bound_http_waits()
    (record,) = caplog.records
    message = record.getMessage()
    assert "TRAINING_PG_TIMEOUT_S=120" in message and f"up to {waits.worst_case_s():.0f} s" in message, (
        message
    )
    assert "exits 75" in message and "Unset" in message
    # MLflow parses the timeout as an int when it makes the call: "2.5" is refused when the command starts (exit 2).
    from training.environment import validate
    from training.errors import EnvironmentVariableError

    unset.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2.5")
    with pytest.raises(
        EnvironmentVariableError, match="MLFLOW_HTTP_REQUEST_TIMEOUT: '2.5' is not a valid int"
    ):
        validate()


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers: each attempt waits its timeout."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def refused() -> Iterator[str]:
    """A port nobody listens on (held by the test, so no other process can start to): each attempt fails at once,
    the backoff is the whole wait."""
    from tests.training.picked_ports import held_port

    with held_port() as port:
        yield f"http://127.0.0.1:{port}"


def _timed_start(tracker: Tracker, limit_s: float, **kwargs: object) -> tuple[float, object]:
    """tracker.start in a thread, given up on after `limit_s` (the old code waited minutes)."""
    box: list[object] = []

    def go() -> None:
        try:
            box.append(tracker.start({"preset": "smoke"}, **kwargs))
        except Exception as exc:  # noqa: BLE001 (returned to the test)
            box.append(exc)

    began = time.monotonic()
    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(limit_s)
    elapsed = time.monotonic() - began
    assert not thread.is_alive(), f"Tracker.start still waiting on a dead server after {limit_s:.0f} s"
    return elapsed, box[0]


@pytest.mark.parametrize(
    ("server", "pg_timeout_s"),
    [("refused", 120), ("silent_listener", 30)],  # 30: 1 s attempts, so that the silent case takes seconds
)
def test_a_tracker_call_to_a_dead_server_returns_within_the_bound(
    server: str,
    pg_timeout_s: int,
    request: pytest.FixtureRequest,
    unset: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import mlflow  # imported before the clock starts

    url = request.getfixturevalue(server)
    unset.setenv("MLFLOW_TRACKING_URI", url)
    unset.setenv("TRAINING_PG_TIMEOUT_S", str(pg_timeout_s))
    bound = tracking.default_http_waits(pg_timeout_s).worst_case_s()
    assert bound <= pg_timeout_s / 3
    try:
        elapsed, raised = _timed_start(Tracker(True, tmp_path, "sentiment"), bound + 10)
        assert isinstance(raised, TrackingError) and url in str(raised)  # a fresh start: exit 2
        assert elapsed <= bound + 5, (elapsed, bound)  # a correctness bound, not a benchmark: + 5 s of slack
        with caplog.at_level(logging.WARNING, logger="training.tracking"):
            elapsed, returned = _timed_start(Tracker(True, tmp_path, "sentiment"), bound + 10, run_id="abc")
        assert returned == "abc" and elapsed <= bound + 5, (returned, elapsed, bound)  # a resumed one goes on
        assert [r.getMessage() for r in caplog.records if "goes on untracked" in r.getMessage()]
    finally:
        mlflow.set_tracking_uri(None)
