"""MLflow tracking (rank 0 only): params, per-step metrics, artifacts.

Default store: a local file store under OUTPUT/mlruns (no server, no sqlite driver needed);
MLFLOW_TRACKING_URI selects a server or database otherwise (in the cluster: the optional Secret
`mlflow`, training/launch_config.py MLFLOW_SECRET). A resumed run continues the same MLflow run
(its id travels in the checkpoint) when the store is the same.

A tracking server can fail where a local file cannot. At a fresh start that is a setup error (exit 2,
nothing trained yet); once the run has progress to lose (a resumed attempt, any call after the start) it
costs only MLflow's view: one warning (Outage), and the run goes on untracked (metrics.json keeps the
results). A study (training/tune.py) applies the same policy to its own calls and its trials' (study_scope).

One call to a dead server must not outlast the process-group timeout: see bound_http_waits.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from training.errors import TrainingError

log = logging.getLogger(__name__)

WAIT_FRACTION = 1 / 3
"""Of TRAINING_PG_TIMEOUT_S: the longest one MLflow request may block rank 0 with the trainer's defaults. The
other ranks wait for it in the next collective, which also has to cover rank 0's own step."""


class TrackingError(TrainingError):
    """The MLflow tracking store refused or did not answer at a fresh start: exit 2, the message says the fix."""


# --------------------------------------------------------------------------- how long one call may block


@dataclass(frozen=True, slots=True)
class HttpWaits:
    """MLflow's HTTP retry settings (its MLFLOW_HTTP_* variables) and the longest wait they allow."""

    retries: int
    backoff_factor: float
    jitter: float
    timeout_s: float
    retry_after: bool
    """A server's Retry-After header is obeyed: urllib3 sleeps as long as it says, without a cap."""

    def worst_case_s(self) -> float:
        """The longest one MLflow request blocks on a dead server, from urllib3's Retry as MLflow builds it
        (mlflow/utils/request_utils.py, mlflow/utils/rest_utils.py http_request): `retries + 1` attempts of up to a
        connect and a read timeout each (`timeout` is both; one address per host), and between them
        Retry.get_backoff_time(): nothing after the first error, then factor * 2**(n-1) plus up to `jitter`,
        capped at Retry.DEFAULT_BACKOFF_MAX; no sleep after the last error. Not bounded: a Retry-After header
        when obeyed, DNS resolution, a server that trickles its answer byte by byte."""
        from urllib3.util import Retry

        sleeps = sum(
            min(Retry.DEFAULT_BACKOFF_MAX, self.backoff_factor * 2 ** (n - 1) + self.jitter)
            for n in range(2, self.retries + 1)
        )
        return (self.retries + 1) * 2 * self.timeout_s + sleeps


def default_http_waits(pg_timeout_s: float) -> HttpWaits:
    """The trainer's defaults: two retries (a server restarting, a dropped connection) and the longest whole-second
    timeout that keeps the worst case within WAIT_FRACTION of the process-group timeout (6 s at 120 s); fewer
    retries only where the budget is too small for one-second attempts. MLflow parses the factor and the timeout
    as integers."""
    budget = WAIT_FRACTION * pg_timeout_s
    for retries in (2, 1, 0):
        base = HttpWaits(retries=retries, backoff_factor=1, jitter=1.0, timeout_s=0, retry_after=False)
        timeout = math.floor((budget - base.worst_case_s()) / (2 * (retries + 1)))
        if timeout >= 1:
            return replace(base, timeout_s=timeout)
    return HttpWaits(retries=0, backoff_factor=1, jitter=1.0, timeout_s=1, retry_after=False)


def bound_http_waits() -> HttpWaits:
    """Before the first MLflow call: set MLflow's HTTP retry variables the user left unset (MLflow reads them at
    each request) to default_http_waits, and return the settings in force; the user's own values win.

    MLflow's own defaults (7 retries, backoff factor 2, 120 s per attempt, Retry-After obeyed) block one call to a
    dead server for ~4 min when the connection is refused and ~20 min when it never answers. In a multi-process
    run rank 0 waits that out inside a step while the other ranks wait in the next collective, which fails after
    TRAINING_PG_TIMEOUT_S: exit 75, and every resumed attempt waits again, up to the preemption cap."""
    from training import environment as env

    pg_timeout_s = float(env.TRAINING_PG_TIMEOUT_S.get() or 120.0)  # as training/distributed.py reads it
    default = default_http_waits(pg_timeout_s)
    for var, value in (
        (env.MLFLOW_HTTP_REQUEST_MAX_RETRIES, str(default.retries)),
        (env.MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR, str(int(default.backoff_factor))),
        (env.MLFLOW_HTTP_REQUEST_BACKOFF_JITTER, str(default.jitter)),
        (env.MLFLOW_HTTP_REQUEST_TIMEOUT, str(int(default.timeout_s))),
        (env.MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER, "true" if default.retry_after else "false"),
    ):
        os.environ.setdefault(var.name, value)
    waits = HttpWaits(
        retries=int(env.MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() or 0),
        backoff_factor=float(env.MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get() or 0),
        jitter=float(env.MLFLOW_HTTP_REQUEST_BACKOFF_JITTER.get() or 0.0),
        timeout_s=float(env.MLFLOW_HTTP_REQUEST_TIMEOUT.get() or 0),
        retry_after=bool(env.MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER.get()),
    )
    worst = waits.worst_case_s()
    if (env.WORLD_SIZE.get() or 1) > 1 and (worst >= pg_timeout_s or waits.retry_after):
        log.warning(
            "MLflow's HTTP settings (retries %d, backoff factor %g, timeout %g s%s) let one call to a dead tracking "
            "server block rank 0 for up to %.0f s%s, and the other ranks give up after TRAINING_PG_TIMEOUT_S=%g s: "
            "on an MLflow outage the run exits 75 and every resumed attempt waits again. Unset "
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES/_BACKOFF_FACTOR/_TIMEOUT/MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER (the "
            "trainer then keeps one call under %.0f s) or lower them",
            waits.retries,
            waits.backoff_factor,
            waits.timeout_s,
            ", Retry-After obeyed" if waits.retry_after else "",
            worst,
            " plus whatever a Retry-After header asks" if waits.retry_after else "",
            pg_timeout_s,
            default.worst_case_s(),
        )
    return waits


# --------------------------------------------------------------------------- the outage policy


def store_errors() -> tuple[type[BaseException], ...]:
    """What a failing store raises: MLflow's errors, and OSErrors (requests' errors are OSErrors; a file store's)."""
    from mlflow.exceptions import MlflowException

    return (MlflowException, OSError)


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _unanswered(exc: BaseException) -> bool:
    """The server did not answer (MLflow wraps requests' error: `raise MlflowException(...)` inside `except`)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def start_error(uri: str, what: str, exc: BaseException, untracked: str) -> TrackingError:
    """The setup error of a fresh start (`what`: run or study; `untracked`: what TRAINING_MLFLOW=0 does)."""
    return TrackingError(
        f"MLflow tracking store {uri} failed at the start of the {what}: {_first_line(exc)}. Check "
        "MLFLOW_TRACKING_URI and its credentials (in the cluster: the Secret `mlflow`, training/README.md) and "
        f"that the server answers, or set TRAINING_MLFLOW=0 to {untracked}"
    )


class Outage:
    """One MLflow store's failures, for a run or for a whole study (its own calls and all its trials'): the first
    failed call logs the one warning, and later calls are skipped, since each would first wait out MLflow's HTTP
    retries (bound_http_waits) and stall every step."""

    def __init__(self, uri: str, untracked: str) -> None:
        self.uri = uri
        self.untracked = untracked
        """What goes on without MLflow, and where its results are (the warning's end)."""
        self.failed = False
        self.run_id: str | None = None
        """The run a Tracker last started under this Outage (in a study: the current trial's)."""

    def fail(self, what: str, exc: BaseException) -> None:
        if self.failed:
            log.info("MLflow tracking store %s still failing to %s (%s)", self.uri, what, _first_line(exc))
            return
        self.failed = True
        log.warning(
            "MLflow tracking store %s failed to %s (%s): %s", self.uri, what, _first_line(exc), self.untracked
        )

    def call(
        self, what: str, fn: Callable[..., Any], *args: Any, even_if_failed: bool = False, **kwargs: Any
    ) -> Any:
        """fn(*args, **kwargs), or None once the store has failed (`even_if_failed`: try anyway, without a
        second warning)."""
        if self.failed and not even_if_failed:
            return None
        try:
            return fn(*args, **kwargs)
        except store_errors() as exc:
            self.fail(what, exc)
            return None


_study: Outage | None = None


@contextlib.contextmanager
def study_scope(outage: Outage | None) -> Iterator[None]:
    """The trials a study runs in this process (training/tune.py) share its Outage: a failure in one trial or in
    the study's own calls leaves the later trials untracked, with one warning in all; and a trial's start is never
    a setup error (the study has progress: its store answered when it started)."""
    global _study
    previous, _study = _study, outage
    try:
        yield
    finally:
        _study = previous


# --------------------------------------------------------------------------- the trainer's tracker


class Tracker:
    """A no-op unless enabled; MLflow is imported only when used."""

    def __init__(self, enabled: bool, output: Path, experiment: str) -> None:
        self.enabled = enabled
        self.run_id: str | None = None
        self._mlflow: Any = None
        self._output = output
        self._experiment = experiment
        self._outage: Outage | None = None

    def start(self, params: dict[str, Any], run_id: str | None = None) -> str | None:
        if not self.enabled:
            return None
        import mlflow

        from training import environment as env

        uri = env.MLFLOW_TRACKING_URI.get()
        if not uri:
            # MLflow 3 refuses file stores unless asked; a local file store is what a laptop wants.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = (self._output / "mlruns").resolve().as_uri()
        study = _study
        if study is not None and study.failed:
            return run_id  # the study's store failed earlier (warned then): its later trials run untracked
        outage = study or Outage(uri, "the run goes on untracked; its results are in metrics.json")
        bound_http_waits()
        try:
            mlflow.set_tracking_uri(uri)
            mlflow.set_experiment(env.MLFLOW_EXPERIMENT_NAME.get() or self._experiment)
            run = None
            if run_id:
                try:
                    run = mlflow.start_run(run_id=run_id)
                except Exception as exc:
                    if _unanswered(exc):
                        raise  # the server is down: a new run would wait out the same retries again
                    # Another store: the old run is not here.
                    log.info("MLflow run %s not found in %s; starting a new run", run_id, uri)
            if run is None:
                run = mlflow.start_run()
                mlflow.log_params({k: ("none" if v is None else str(v))[:500] for k, v in params.items()})
        except store_errors() as exc:
            if run_id is None and study is None:
                raise start_error(uri, "run", exc, "train untracked") from exc
            outage.fail("start the run" if run_id is None else f"continue run {run_id}", exc)
            return run_id  # kept in the checkpoint: a later attempt may continue that run
        self._mlflow = mlflow
        self._outage = outage
        self.run_id = outage.run_id = run.info.run_id
        return self.run_id

    def metrics(self, values: dict[str, float], step: int) -> None:
        if self._mlflow is not None and self._outage is not None:
            self._outage.call(
                "log metrics", self._mlflow.log_metrics, {k: float(v) for k, v in values.items()}, step=step
            )

    def artifact(self, path: Path) -> None:
        if self._mlflow is not None and self._outage is not None and path.exists():
            if path.is_dir():
                self._outage.call(
                    "log artifacts", self._mlflow.log_artifacts, str(path), artifact_path=path.name
                )
            else:
                self._outage.call("log an artifact", self._mlflow.log_artifact, str(path))

    def end(self, status: str = "FINISHED") -> None:
        # Also after a failure: end_run leaves MLflow's process-wide active run first (a study's next trial starts
        # its own run in this process), then marks it ended on the server if that answers again.
        if self._mlflow is not None and self._outage is not None:
            self._outage.call("end the run", self._mlflow.end_run, status=status, even_if_failed=True)
            self._mlflow = None
