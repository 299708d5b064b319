"""A promotion stopped while its deploy half ran: the record that says so.

Ctrl-C, or SIGTERM from the pipeline runner, a cancelled CI job or a deleted pod, while `up`, the smoke check or the
rollback redeploy runs: the command's process group is stopped (deploy.run_group) and the lock goes, and the
environment may now run the candidate, the image it served before, or a half-applied stack (a `pulumi up` killed
mid-way). Without a record the next promotion, a rollback and an auditor would see nothing of it. The promote
record becomes a `deploy_interrupted` one (deployment `interrupted`: which image, what was served before, what
was running, which signal, what to check); the registry alias and the history do not move, since the candidate
was never confirmed live. The interruption itself still ends the promotion (130 / 143, as before).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from promotion.card import render_markdown
from promotion.errors import Terminated
from promotion.record import validate_record
from promotion.store import ModelStore

STOPPED = (KeyboardInterrupt, Terminated)
"""What stops a promotion from outside: Ctrl-C and the CLI's SIGTERM."""

WRITE_TIMEOUT_S = 8.0
"""How long the record's write may take before the promotion gives up on it (the log keeps its reason). After the
deploy command's `STOP_GRACE_S` (10 s) this leaves time, under a pod's 30 s termination grace, to remove the lock:
an unreachable store must not cost the environment its lock as well."""

HOLD_MAX_S = 10.0
"""How long Ctrl-C or SIGTERM waits for the writes that make a promotion whole (`writes_held`). A store that hangs
must not hold the promotion past a pod's 30 s termination grace: the lock's removal still needs time after it."""

PULUMI_INTERRUPTED = "https://www.pulumi.com/docs/iac/operations/troubleshooting/interrupted-updates/"


@dataclass(slots=True)
class Step:
    """What the deploy half is running, kept current so that an interruption can say it."""

    during: str = "up"
    """`up` (the deploy command with the candidate), `smoke` (the live check) or `rollback` (the redeploy of the
    image served before, after a failed `up` or smoke check)."""
    deploy_error: str | None = None
    """Why `up` or the smoke check failed, when the rollback was running."""


def _signal(stop: BaseException) -> str:
    return "SIGINT" if isinstance(stop, KeyboardInterrupt) else "SIGTERM"


def mark(
    record: dict[str, Any], *, image: str, served_before: str | None, step: Step, stop: BaseException
) -> None:
    """Turn the (unsaved) promote record into the record of a deploy stopped during `step`."""
    stack, env = record["stack"], record["environment"]
    before = served_before or "nothing (its first deployment)"
    state = {
        "up": f"the deploy command was applying {image}: the stack may run it, {before}, or a half-applied mix",
        "smoke": f"{image} had been deployed and its live smoke check was running: it most likely serves, unchecked",
        "rollback": f"the deploy had failed ({step.deploy_error}) and the redeploy of {before} was running: the "
        f"stack may run {image}, {before}, or a half-applied mix",
    }[step.during]
    back = (
        f"put {served_before} back (`pulumi config set --path serving.image {served_before}`, `pulumi up`; not "
        "`python -m promotion rollback`, which steps back from it to the version before)"
        if served_before
        else "remove the serving deployment"
    )
    signal = _signal(stop)
    record.update(decision="deploy_interrupted", deployable=False)
    record["reasons"].insert(
        0,
        f"promotion stopped by {signal} during {step.during}: {state}. The registry alias and the {env} history "
        f"still name what was served before. Check stack {stack} (`pulumi stack --stack {stack}`: its last update "
        f"and the serving image; a `pulumi up` killed mid-way leaves pending operations: confirm them, then "
        f"`pulumi refresh --stack {stack}`, {PULUMI_INTERRUPTED}), then promote this candidate again (the same "
        f"command: judged against the same champion, it deploys anew) or {back}",
    )
    record["model"]["alias"] = None  # the registered version keeps no alias: the champion is unchanged
    record["deployment"] = {
        "status": "interrupted",
        "image": image,
        "served_before": served_before,
        "stopped_during": step.during,
        "signal": signal,
        "deploy_error": step.deploy_error,
    }
    validate_record(record)


def keep(
    store: ModelStore,
    record: dict[str, Any],
    *,
    image: str,
    served_before: str | None,
    step: Step,
    stop: BaseException,
) -> str | None:
    """`mark` then `write`: the record's URI, or None. Raises nothing but a second interruption: the caller re-raises
    `stop`, whose ending (130 / 143, the lock's removal) must not be replaced by a failure of this record."""
    try:
        mark(record, image=image, served_before=served_before, step=step, stop=stop)
    except Exception as exc:  # a schema bug here must not turn a SIGTERM into a traceback with exit 1
        print(
            f"promotion: stopped during {step.during} of {image}; no record: {exc}",
            file=sys.stderr,
            flush=True,
        )
        return None
    return write(store, record)


def write(store: ModelStore, record: dict[str, Any], timeout_s: float | None = None) -> str | None:
    """Write the record and its model card, waiting at most `timeout_s`; its URI, or None (stderr says why). Never
    raises an Exception: the interruption that led here must still end the promotion and release its lock."""
    done: dict[str, Any] = {}

    def work() -> None:
        try:
            done["uri"] = store.write_record(record, render_markdown(record))
        except Exception as exc:  # reported below: this runs on the way out of an interruption
            done["error"] = exc

    # A thread, so that a store that hangs (an object store behind a partition) cannot hold the promotion past
    # its termination grace; a daemon, so that it does not keep the stopped process alive either.
    writer = threading.Thread(target=work, name="deploy-interrupted-record", daemon=True)
    writer.start()
    writer.join(WRITE_TIMEOUT_S if timeout_s is None else timeout_s)
    uri = done.get("uri")
    if uri:
        print(
            f"promotion: {record['reasons'][0]}. Recorded as {record['decision']} in {uri}",
            file=sys.stderr,
            flush=True,
        )
        return str(uri)
    why = (
        done.get("error") or f"it did not finish in {WRITE_TIMEOUT_S if timeout_s is None else timeout_s:g} s"
    )
    print(
        f"promotion: {record['reasons'][0]}. Its record {record['record_id']} could not be written to "
        f"{store.record_uri(record['record_id'])} ({why}): this log is the only trace",
        file=sys.stderr,
        flush=True,
    )
    return None


@contextlib.contextmanager
def writes_held(max_s: float | None = None) -> Iterator[None]:
    """Ctrl-C and SIGTERM wait for the body (the record, the history, the alias, the drift reference) and are
    delivered after it.

    Once the smoke check has passed the new image is live: stopped between the record, the history and the alias,
    a promotion left the image serving with no history entry (a rollback would restore the wrong version) or an
    alias the history did not name (rollbacks refused). The same holds for a local promotion and a rollback. A second
    signal, or `max_s` (HOLD_MAX_S) after the first, ends the hold at once: a store that hangs cannot keep the process
    past its grace. Outside the main thread (no handler can be set there) nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # An ignored signal (SIGINT in a shell's background job) stays ignored: held, it would count as the first.
    previous: dict[int, Any] = {
        int(s): signal.getsignal(s)
        for s in (signal.SIGINT, signal.SIGTERM)
        if signal.getsignal(s) is not signal.SIG_IGN
    }
    pending: list[int] = []
    timer: list[threading.Timer] = []

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    def hold(signum: int, frame: Any) -> None:
        if pending:  # the second signal, or the deadline: stop holding, deliver it now
            restore()
            _deliver(signum, previous[signum], frame)
            return
        pending.append(signum)
        print(
            f"promotion: {signal.Signals(signum).name} received while the promotion is being recorded: it ends once "
            f"the record, history, alias and drift reference are written (at most {wait:g} s; again to stop now)",
            file=sys.stderr,
            flush=True,
        )
        # A real signal to the main thread, not interrupt_main(): it also breaks a blocking read (EINTR).
        main = threading.main_thread().ident
        assert main is not None
        timer.append(threading.Timer(wait, signal.pthread_kill, args=(main, signum)))
        timer[0].daemon = True
        timer[0].start()

    wait = HOLD_MAX_S if max_s is None else max_s
    for s in previous:
        signal.signal(s, hold)
    try:
        yield
    finally:
        for t in timer:
            t.cancel()
        restore()
        if pending:
            _deliver(pending[0], previous[pending[0]], None)


def _deliver(signum: int, handler: Any, frame: Any) -> None:
    """What the signal would have done without the hold: its Python handler (KeyboardInterrupt, the CLI's
    Terminated), nothing when ignored, else its default action."""
    if callable(handler):
        handler(signum, frame)
    elif handler != signal.SIG_IGN:
        signal.raise_signal(signum)
