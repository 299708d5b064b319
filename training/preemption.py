"""Stop requests: SIGTERM/SIGINT and the clouds' spot/preemption notices, behind one interface.

Whatever asks to stop (a signal from the kubelet, a notice polled from the instance
metadata service) only sets a flag; the loop finishes its current step, saves a checkpoint
and exits 75. Notice sources (all plain HTTP on the link-local metadata endpoint):

- AWS: IMDSv2 token, then ``GET /latest/meta-data/spot/instance-action`` (404 until AWS
  schedules the stop, then ``{"action": "terminate"|"stop"|"hibernate", "time": ...}``; ~2 minutes notice).
- GCP: ``GET /computeMetadata/v1/instance/preempted`` with ``Metadata-Flavor: Google``
  (``TRUE`` once preempted; ~30 s notice).
- Azure: ``GET /metadata/scheduledevents?api-version=2020-07-01`` with ``Metadata: true``;
  an event of type ``Preempt`` (Spot eviction, ~30 s notice).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)


class StopRequest:
    """A thread-safe, first-reason-wins stop flag."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None
        self._lock = threading.Lock()

    def set(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
                log.warning(
                    "stop requested (%s): finishing the current step, then checkpoint and exit 75", reason
                )
            self._event.set()

    def __bool__(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)


_EARLY_STOP: list[str] = []
"""The signal the early handler acted on, if any (its exit code must survive whatever unwinding does)."""


def install_early_exit() -> None:
    """Until the training loop takes over, SIGTERM/SIGINT end the process at once with exit 75.

    Installed first thing by ``python -m training`` (before torch, data or model loading, which take
    seconds to minutes): nothing unsaved exists yet, so "stop now, rerun me" is exact, and the pod never
    dies with 143 (the Job would count that as a failure). The loop's own handlers (below) replace it and
    put it back when they are uninstalled.

    The SystemExit is raised wherever the main thread happens to be, inside some library's import as often as
    not, and code that catches everything there turns it into its own error (a run of the pipeline's train step
    once exited 1 with a ModuleNotFoundError): an exit hook, registered first so that it runs last, keeps the
    status at 75 once the signal was taken.
    """

    def handler(signum: int, frame: object) -> None:
        from training.errors import EXIT_PREEMPTED

        name = signal.Signals(signum).name
        os.write(
            2, f"training: {name} before training started: nothing to save, exit {EXIT_PREEMPTED}\n".encode()
        )
        _EARLY_STOP.append(name)
        raise SystemExit(EXIT_PREEMPTED)

    if not getattr(install_early_exit, "hooked", False):
        atexit.register(_exit_preempted_after_early_stop)
        install_early_exit.hooked = True  # type: ignore[attr-defined]
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


def _exit_preempted_after_early_stop() -> None:
    if _EARLY_STOP:
        from training.errors import EXIT_PREEMPTED

        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # closed or gone: nothing left to say
                stream.flush()
        os._exit(EXIT_PREEMPTED)


def install_signal_handlers(stop: StopRequest) -> Callable[[], None]:
    """SIGTERM and the first SIGINT request a stop; a second SIGINT interrupts at once. Returns an uninstaller."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    # A handler installed by a caller (tune's between-trials flag) that already caught a signal while this run
    # was setting up: that stop is this run's too, or the trial would train to its end before anyone noticed.
    for old in previous.values():
        pending = getattr(old, "reason", None)
        if isinstance(pending, str):
            stop.set(pending)
            break

    def handler(signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        if signum == signal.SIGINT and stop:
            raise KeyboardInterrupt  # second Ctrl-C: the user means it
        stop.set(name)

    for sig in previous:
        signal.signal(sig, handler)

    def uninstall() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return uninstall


# --- cloud notices --------------------------------------------------------------------------


class InterruptionNotice(Protocol):
    """One cloud's 'this machine goes away soon' signal."""

    name: str

    def poll(self) -> str | None:
        """A description of the pending interruption, or None if there is none (or the endpoint is unreachable)."""
        ...


def _get(url: str, headers: dict[str, str], timeout: float, method: str = "GET") -> tuple[int, str]:
    req = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (fixed link-local endpoints)
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""


class _MetadataNotice:
    """A notice read from the instance metadata service at ``base`` (short timeouts: it is link-local)."""

    name = ""
    default_base = "http://169.254.169.254"

    def __init__(self, base: str | None = None, timeout: float = 1.0) -> None:
        self.base = (base or self.default_base).rstrip("/")
        self.timeout = timeout
        self._warned = False

    def _unreachable(self, exc: BaseException) -> None:
        """Say once (not every poll) that notices cannot be read: the run then relies on SIGTERM alone."""
        if not self._warned:
            self._warned = True
            log.warning(
                "%s interruption notices: metadata endpoint %s unreachable (%s); relying on SIGTERM only",
                self.name,
                self.base,
                exc,
            )

    def poll(self) -> str | None:
        raise NotImplementedError


class AwsSpotNotice(_MetadataNotice):
    name = "aws"

    def poll(self) -> str | None:
        try:
            status, token = _get(
                f"{self.base}/latest/api/token",
                {"X-aws-ec2-metadata-token-ttl-seconds": "60"},
                self.timeout,
                "PUT",
            )
            headers = {"X-aws-ec2-metadata-token": token} if status == 200 else {}
            status, body = _get(f"{self.base}/latest/meta-data/spot/instance-action", headers, self.timeout)
        except (OSError, urllib.error.URLError) as exc:
            self._unreachable(exc)
            return None
        if status != 200:
            return None  # 404: no interruption scheduled
        try:
            action = json.loads(body)
            return f"aws spot {action.get('action', 'interruption')} at {action.get('time', '?')}"
        except ValueError:
            return "aws spot interruption"


class GcpPreemptionNotice(_MetadataNotice):
    name = "gcp"
    default_base = "http://metadata.google.internal"

    def poll(self) -> str | None:
        try:
            status, body = _get(
                f"{self.base}/computeMetadata/v1/instance/preempted",
                {"Metadata-Flavor": "Google"},
                self.timeout,
            )
        except (OSError, urllib.error.URLError) as exc:
            self._unreachable(exc)
            return None
        return "gcp preempted" if status == 200 and body.strip().upper() == "TRUE" else None


class AzureScheduledEvents(_MetadataNotice):
    name = "azure"

    def poll(self) -> str | None:
        try:
            status, body = _get(
                f"{self.base}/metadata/scheduledevents?api-version=2020-07-01",
                {"Metadata": "true"},
                self.timeout,
            )
            events = json.loads(body).get("Events", []) if status == 200 else []
        except (OSError, urllib.error.URLError) as exc:
            self._unreachable(exc)
            return None
        except (ValueError, AttributeError):
            return None
        for event in events:
            if event.get("EventType") == "Preempt":
                return f"azure Preempt {event.get('EventId', '')} not before {event.get('NotBefore', '?')}".strip()
        return None


NOTICES: dict[str, type[_MetadataNotice]] = {
    "aws": AwsSpotNotice,
    "gcp": GcpPreemptionNotice,
    "azure": AzureScheduledEvents,
}


def notice_for(provider: str, base: str | None = None) -> InterruptionNotice | None:
    """The notice source for TRAINING_INTERRUPTION_PROVIDER (None for 'none')."""
    if provider in ("", "none"):
        return None
    if provider not in NOTICES:
        from training.errors import ConfigError

        raise ConfigError(
            "TRAINING_INTERRUPTION_PROVIDER", f"unknown {provider!r}; use none, aws, gcp or azure"
        )
    return NOTICES[provider](base)


class Watcher:
    """Polls a notice source in a daemon thread and sets the stop request when it fires."""

    def __init__(self, notice: InterruptionNotice, stop: StopRequest, interval: float = 5.0) -> None:
        self.notice = notice
        self.stop = stop
        self.interval = interval
        self._halt = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"{notice.name}-interruption-watcher", daemon=True
        )

    def _run(self) -> None:
        while not self._halt.is_set():
            found = self.notice.poll()
            if found:
                self.stop.set(found)
                return
            self._halt.wait(self.interval)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def close(self) -> None:
        self._halt.set()
        self._thread.join(timeout=self.interval + 2)


def start_watcher(stop: StopRequest) -> Watcher | None:
    """The watcher configured by the environment (TRAINING_INTERRUPTION_PROVIDER, ...), started; or None."""
    from training import environment as env

    notice = notice_for(
        env.TRAINING_INTERRUPTION_PROVIDER.get() or "none", env.TRAINING_METADATA_ENDPOINT.get()
    )
    if notice is None:
        return None
    return Watcher(notice, stop, float(env.TRAINING_INTERRUPTION_POLL_S.get() or 5.0)).start()
