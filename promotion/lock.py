"""One promotion or rollback of an environment at a time, whoever runs it.

The history is read-modify-write (object stores have no append), and a promotion reads the champion, judges,
deploys and appends: two runs of the same environment at once (CI's deploy group and the cluster's retraining
pipeline, or a person at a terminal) would judge against the same champion, both deploy, and one event would be
lost. GitHub's concurrency group serialises only the workflows of one repository.

The lock is an object beside the history, created with the store's own create-only write
(evidence.write_bytes(exclusive=True)): exactly one writer wins on a local disk, S3, GCS and Azure Blob alike. It
is removed when the operation ends, however it ends in Python (a gate's no, an error, Ctrl-C). A holder killed outright (SIGKILL, a
lost node) leaves it: the next run is refused, naming the holder, and `python -m promotion unlock` removes it once
someone has checked what the interrupted run changed, as Terraform's `force-unlock` does for its state. One case
needs no person: a holder provably gone (takeover.py: same machine, boot and process namespace, its pid ended, and
no process left carrying its lock id, such as the deploy it had started) is taken over, with a log line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from promotion import takeover
from promotion.errors import PromotionError
from promotion.evidence import join, read_bytes, remove, write_bytes


class LockHeld(PromotionError):
    """Another promotion or rollback of the environment holds its lock."""


def lock_uri(root: str, model: str, environment: str) -> str:
    return join(root, model, "environments", f"{environment}.lock")


def _holder(raw: bytes | None) -> dict[str, Any]:
    try:
        doc = json.loads(raw or b"")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


UNREADABLE = "unreadable"
"""The id that removes a lock whose file is damaged (it names no id of its own)."""


def _unlock_command(environment: str, lock_id: str) -> str:
    return f"python -m promotion unlock --env {environment} --lock-id {lock_id or UNREADABLE} [--store ...] [--config FILE]"


def _github_run() -> str | None:
    env = os.environ
    if not env.get("GITHUB_RUN_ID"):
        return None
    if env.get("GITHUB_SERVER_URL") and env.get("GITHUB_REPOSITORY"):
        return f"{env['GITHUB_SERVER_URL']}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return env["GITHUB_RUN_ID"]


@contextmanager
def held(
    root: str, model: str, environment: str, *, operation: str, requested_by: str | None
) -> Iterator[dict[str, Any]]:
    uri = lock_uri(root, model, environment)
    holder: dict[str, Any] = {
        "lock_id": uuid.uuid4().hex,
        "environment": environment,
        "operation": operation,
        "requested_by": requested_by,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        # A CI job says where it ran: the person who finds the lock can look at that run. In the cluster the
        # host is the pipeline step's pod name, which starts with its Workflow's.
        "run": _github_run(),
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **takeover.identity(),
    }
    if not _acquire(uri, holder):
        other = _holder(read_bytes(uri))
        who = ", ".join(
            f"{k} {other[k]}"
            for k in ("operation", "requested_by", "host", "pid", "run", "created")
            if other.get(k)
        )
        raise LockHeld(
            f"another promotion or rollback of {environment} is running ({uri}: {who or 'unreadable lock'}). "
            "Wait for it to end and run again. If it was killed (its CI job or pod is gone), check what it changed "
            f"(`python -m promotion history --env {environment}`, the deployed image), then remove the lock: "
            f"`{_unlock_command(environment, str(other.get('lock_id', '')))}`. Nothing was changed"
        ) from None
    # The deploy and smoke commands inherit it: while one still runs, its holder is not gone (takeover.gone).
    before = os.environ.get(takeover.ENV)
    os.environ[takeover.ENV] = holder["lock_id"]
    try:
        yield holder
    finally:
        if before is None:
            os.environ.pop(takeover.ENV, None)
        else:
            os.environ[takeover.ENV] = before
        try:
            release(uri, holder["lock_id"])
        except Exception as exc:  # never hide the operation's own outcome behind a failed clean-up
            print(
                f"promotion: could not remove the lock {uri} ({exc}); the next run of {environment} will be "
                f"refused until `{_unlock_command(environment, holder['lock_id'])}`",
                file=sys.stderr,
            )


def _acquire(uri: str, holder: dict[str, Any]) -> bool:
    """Create the lock; False when another holds it. A holder provably gone is replaced, saying so."""
    data = (json.dumps(holder, indent=2) + "\n").encode()
    try:
        write_bytes(uri, data, exclusive=True)
        return True
    except FileExistsError:
        pass
    other = _holder(read_bytes(uri))
    gone = takeover.gone(other)
    if not gone or not takeover.remove_if_still(uri, str(other.get("lock_id")), lambda: _current_id(uri)):
        return False
    print(
        f"promotion: took over the lock {uri} left by {other.get('operation')} pid {other.get('pid')} on "
        f"{other.get('host')} (lock id {other.get('lock_id')}, created {other.get('created')}): {gone}. "
        f"Check what it changed: `python -m promotion history --env {holder['environment']}`",
        file=sys.stderr,
    )
    try:
        write_bytes(uri, data, exclusive=True)
        return True
    except FileExistsError:  # another run got in between: it holds the environment now
        return False


def _current_id(uri: str) -> str | None:
    raw = read_bytes(uri)
    return None if raw is None else str(_holder(raw).get("lock_id") or UNREADABLE)


def release(uri: str, lock_id: str) -> bool:
    """Remove the lock if it is `lock_id`'s. False when there is none; LockHeld when another run holds it (it
    was unlocked by hand and taken again: removing it would let a third run in)."""
    raw = read_bytes(uri)
    if raw is None:
        return False
    current = _holder(raw).get("lock_id") or UNREADABLE
    if current != lock_id:
        raise LockHeld(f"{uri} is held by lock id {current}, not {lock_id}: not removed")
    remove(uri)
    return True
