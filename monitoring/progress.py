"""The training job's progress stamp for the TrainingNoProgress alert (monitoring/rules/training.yaml).

The trainer calls `mark(step)` at each logged step on rank 0. The stamp
`ml_training_last_progress_timestamp_seconds{job_name}` (and `ml_training_step{job_name}`) goes to the
Pushgateway named by MONITORING_PUSHGATEWAY_URL, grouped by `job_name` = MONITORING_JOB_NAME (the
Kubernetes Job's name, which kube-state-metrics' `kube_job_status_active{job_name}` carries too: the rule
joins on it). Pushgateway job label: `ml-training`.

Training is never slowed or failed by it: `mark` only stores the latest step and wakes a daemon thread;
the thread pushes with a bounded timeout, and a gateway that is down or slow costs a log line (once, and
once more when it recovers), never an exception or a wait in the loop. Unset URL or job name: no thread,
`mark` does nothing. Standard library + prometheus-client (imported in the thread only).

The Pushgateway keeps a group until it is deleted: every finished run's stamp would stay for ever (one group per
Argo run, whose `job_name` is the Workflow's name), and a Job launched again under its old name would find the old
run's stamp. So the trainer calls `finish()` once its loop has ended (rank 0): the group is deleted as the process
exits, after the final phase (test scoring, model files, export) that a hang can still stall while the stamp ages.
A run stopped inside its loop (preempted, exit 75) keeps its group: the retry resumes and stamps again. The delete
is bounded by the push timeout and a failure costs a log line, never the run's exit code.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from monitoring import environment as env

JOB = "ml-training"
TIMEOUT_S = 3.0  # per push: the stamp is minutes-grained (the alert waits 30 min), a slow gateway is skipped
log = logging.getLogger("monitoring.progress")


def _push(url: str, job_name: str, step: int, stamp: float, timeout: float) -> None:
    from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

    from monitoring.metrics import OWN

    registry = CollectorRegistry()
    Gauge("ml_training_last_progress_timestamp_seconds", OWN["ml_training_last_progress_timestamp_seconds"],
          registry=registry).set(stamp)  # fmt: skip
    Gauge("ml_training_step", OWN["ml_training_step"], registry=registry).set(step)
    push_to_gateway(url, job=JOB, grouping_key={"job_name": job_name}, registry=registry, timeout=timeout)


def _delete(url: str, job_name: str, timeout: float) -> None:
    from prometheus_client import delete_from_gateway

    delete_from_gateway(url, job=JOB, grouping_key={"job_name": job_name}, timeout=timeout)


class ProgressPusher:
    """Latest-value pusher: `mark` is O(1) and never blocks; one daemon thread does the HTTP."""

    def __init__(
        self, url: str, job_name: str, *, timeout_s: float = TIMEOUT_S,
        push: Callable[[str, str, int, float, float], None] = _push,
        delete: Callable[[str, str, float], None] = _delete,
    ) -> None:  # fmt: skip
        self.url, self.job_name, self.timeout_s = url, job_name, timeout_s
        self._push, self._delete = push, delete
        self.pushed = self.failed = 0
        self.finished = self.deleted = False
        self._exit_hooked = False
        self._latest: tuple[int, float] | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="training-progress", daemon=True)
        self._thread.start()

    def mark(self, step: int, now: float | None = None) -> None:
        with self._lock:
            self._latest = (int(step), time.time() if now is None else now)
            self.finished = False  # a later run in this process (same job name) is going: its stamp must stay
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            self._send()

    def _send(self) -> None:
        with self._lock:
            latest, self._latest = self._latest, None
        if latest is None:
            return
        try:
            self._push(self.url, self.job_name, latest[0], latest[1], self.timeout_s)
        except Exception as exc:  # a gateway outage must never reach the training loop
            self.failed += 1
            if not self._failing:
                log.warning("progress push to %s failed (%r); training goes on, retrying on later steps",
                            self.url, exc)  # fmt: skip
            self._failing = True
            return
        self.pushed += 1
        if self._failing:
            log.warning("progress push to %s works again", self.url)
        self._failing = False

    def close(self, timeout_s: float | None = None) -> None:
        """Stop the thread after at most one last push (bounded by the push timeout)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(self.timeout_s + 1 if timeout_s is None else timeout_s)
        if self._thread.is_alive():
            return
        self._send()

    def finish(self) -> None:
        """The run's loop has ended: delete its group when the process exits (`at_exit`)."""
        self.finished = True
        if not self._exit_hooked:
            atexit.register(self.at_exit)
            self._exit_hooked = True

    def at_exit(self) -> None:
        """Registered by `finish`: the finished run's group goes; a run that marked again since keeps it."""
        if not self.finished:
            return
        with self._lock:
            self._latest = None  # the group is about to go: pushing the last stamp first would be wasted
        self.close()
        self.delete()

    def delete(self) -> bool:
        """Delete this job name's group from the gateway (bounded by the push timeout); False, logged, if it fails."""
        try:
            self._delete(self.url, self.job_name, self.timeout_s)
        except Exception as exc:  # the run is done and fine: a leftover group is the only cost
            log.warning("could not delete the progress group job_name=%s from %s (%r): it stays until "
                        "`curl -X DELETE %s/metrics/job/%s/job_name/%s`", self.job_name, self.url, exc,
                        self.url.rstrip("/"), JOB, self.job_name)  # fmt: skip
            return False
        self.deleted = True
        return True


class _Off:
    def mark(self, step: int, now: float | None = None) -> None:
        return None

    def close(self, timeout_s: float | None = None) -> None:
        return None

    def finish(self) -> None:
        return None


def from_environment(environ: dict[str, str] | None = None) -> Any:
    """A ProgressPusher when MONITORING_PUSHGATEWAY_URL and MONITORING_JOB_NAME are set, else a no-op."""
    url, job_name = env.MONITORING_PUSHGATEWAY_URL.get(environ), env.MONITORING_JOB_NAME.get(environ)
    if not url or not job_name:
        return _Off()
    return ProgressPusher(url, job_name)


_pusher: Any = None


def mark(step: int) -> None:
    """The trainer's one call (rank 0, each logged step): configured from the environment on first use."""
    global _pusher
    try:
        if _pusher is None:
            _pusher = from_environment()
        _pusher.mark(step)
    except Exception as exc:  # a bad environment value is logged, never fatal to training
        log.warning("training progress metric off: %s", exc)
        _pusher = _Off()


def finish() -> None:
    """The trainer's call once its loop has ended (rank 0): the run's group is deleted as the process exits."""
    global _pusher
    try:
        if _pusher is None:
            _pusher = from_environment()
        _pusher.finish()
    except Exception as exc:  # never fatal to a run that has just trained
        log.warning("training progress group not deleted: %s", exc)
