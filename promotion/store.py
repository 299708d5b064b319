"""The model store: promotion records and each environment's promotion history.

Layout under the store root (a local folder or a bucket prefix, via fsspec):

    <root>/<model>/records/<record_id>.json   the record (also the model card's data)
    <root>/<model>/records/<record_id>.md     the same record as a readable model card
    <root>/<model>/environments/<env>.json    {"environment", "events": [...]} in order
    <root>/<model>/environments/<env>.lock    present while a promotion or rollback runs (promotion/lock.py)

Records are never overwritten. The environment history is replayed as a stack:
`promote` pushes a version, `rollback` pops one; the top is what the environment
serves, the entry below it is where a rollback goes.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import os
from dataclasses import dataclass
from typing import Any

from promotion.errors import PromotionError
from promotion.evidence import join, read_bytes, write_bytes

DEFAULT_STORE = "runs/model-store"

RECORD_SCHEMA = "eu-ml-platform/promotion-record"
RECORD_FORMAT = 1
"""The record format this code writes and reads (record.schema.json's `format_version`): every record since the
first has it, so any older record reads. A record with a higher one was written by a newer promotion."""
HISTORY_FORMAT = 1
"""The history's `format_version`. Histories written before it existed have none and read as 1 (their events are
the same); older readers ignore it, so it changes nothing for them."""
EVENT_ACTIONS = ("promote", "rollback")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def to_json(obj: Any) -> str:
    """A record or history as strict JSON. A diverged run's metrics.json holds NaN, which Python writes as a bare
    `NaN` that jq, JavaScript and most JSON tools refuse: the record an auditor reads would not open. Non-finite
    numbers become null (the gates already fail on them, saying so)."""
    return json.dumps(_finite(obj), indent=2, allow_nan=False) + "\n"


_RESTORE = (
    "restore it from the bucket's object versions or a backup (the records in records/ hold every decision); "
    "nothing was changed"
)


def _newer(what: str, uri: str, found: str, reads: str) -> PromotionError:
    # Two CLI versions share one store during a rollout: the older one must stop, not misread what the newer wrote
    # (or tell the user to restore a history that is fine).
    return PromotionError(
        f"{what} {uri} was written by a newer promotion ({found}; this one reads {reads}): run this command from a "
        "checkout at least as new as the one that wrote it (the promotion CI jobs and the pipeline image alike). "
        "Nothing was changed, and the file is kept as it is"
    )


def default_store() -> str:
    return os.environ.get("PROMOTION_STORE") or DEFAULT_STORE


@dataclass(frozen=True, slots=True)
class Deployed:
    """One entry of an environment's effective history (what the alias pointed to)."""

    version: str
    record_id: str
    serving_image: str | None


class ModelStore:
    def __init__(self, root: str, model: str) -> None:
        self.root = root.rstrip("/")
        self.model = model
        # Records are immutable (write_record refuses an existing id), so one read per command is enough: the
        # sequence gates walk an environment's whole stack of records up to three times per evaluation (promoted-
        # from, loadtest-source, the recorded load test), which after a year is hundreds of GETs per walk.
        self._records: dict[str, dict[str, Any]] = {}

    def record_uri(self, record_id: str, suffix: str = "json") -> str:
        return join(self.root, self.model, "records", f"{record_id}.{suffix}")

    def history_uri(self, environment: str) -> str:
        return join(self.root, self.model, "environments", f"{environment}.json")

    def write_record(self, record: dict[str, Any], card_markdown: str) -> str:
        uri = self.record_uri(record["record_id"])
        if read_bytes(uri) is not None:
            raise PromotionError(f"record {uri} exists: records are immutable, a new decision needs a new id")
        write_bytes(uri, to_json(record).encode())
        write_bytes(self.record_uri(record["record_id"], "md"), card_markdown.encode())
        return uri

    def write_attachment(self, record_id: str, name: str, data: bytes) -> str:
        """A file that belongs to a record (e.g. the post-deploy load test), beside it."""
        uri = join(self.root, self.model, "records", f"{record_id}.{name}")
        write_bytes(uri, data)
        return uri

    def read_attachment(self, record_id: str, name: str) -> bytes | None:
        return read_bytes(join(self.root, self.model, "records", f"{record_id}.{name}"))

    def read_record(self, record_id: str) -> dict[str, Any]:
        if record_id not in self._records:
            self._records[record_id] = self._read_record(record_id)
        return copy.deepcopy(self._records[record_id])  # a caller's edit must not change what the store read

    def _read_record(self, record_id: str) -> dict[str, Any]:
        uri = self.record_uri(record_id)
        raw = read_bytes(uri)
        if raw is None:
            raise PromotionError(f"record {uri} not found: is --store the same as at promotion?")
        record = _load(raw, uri, "promotion record")
        version = record.get("format_version")
        if isinstance(version, int) and not isinstance(version, bool) and version > RECORD_FORMAT:
            raise _newer("promotion record", uri, f"format_version {version}", f"up to {RECORD_FORMAT}")
        # Champion metrics, lineage and rollbacks are read from here: a hand-edited record must fail as bad input
        # (exit 2, naming the file), not as a KeyError that exits 1 like a gate's rejection.
        if not isinstance(record.get("lineage"), dict):
            raise PromotionError(f"promotion record {uri} has no `lineage` object: {_RESTORE}")
        return record

    def events(self, environment: str) -> list[dict[str, Any]]:
        return list(self._history(environment).get("events", []))

    def _history(self, environment: str) -> dict[str, Any]:
        """The history document ({} before the first event), checked: readable by this version, events well formed."""
        uri = self.history_uri(environment)
        raw = read_bytes(uri)
        if raw is None:
            return {}
        doc = _load(raw, uri, "promotion history")
        version = doc.get("format_version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            # Only a higher number is a newer promotion's: anything else is a damaged file.
            raise PromotionError(
                f"promotion history {uri}: `format_version` {version!r} is not a version number: {_RESTORE}"
            )
        if version > HISTORY_FORMAT:
            raise _newer("promotion history", uri, f"format_version {version}", f"up to {HISTORY_FORMAT}")
        events: Any = doc.get("events")
        # A newer promotion that adds an event action raises the history's format_version (older readers would
        # replay the stack without it): at this version an action not known here is damage, to be restored.
        if not isinstance(events, list) or not all(
            isinstance(e, dict) and e.get("action") in EVENT_ACTIONS and e.get("record_id") and "version" in e
            for e in events
        ):
            raise PromotionError(
                f"promotion history {uri}: `events` must be a list of promote/rollback events with version and "
                f"record_id{_bad_actions(events)}: {_RESTORE}"
            )
        return doc

    def append_event(self, environment: str, event: dict[str, Any]) -> None:
        # Read-modify-write: object stores have no append. promote() and rollback() hold the environment's
        # lock (promotion/lock.py) around it, so no concurrent writer can lose an event. Keys this version does
        # not know (a newer one's, same format) are written back as they were: nothing another version kept is lost.
        doc = self._history(environment)
        events = [*doc.get("events", []), event]
        rewritten = {**doc, "format_version": HISTORY_FORMAT, "environment": environment, "events": events}
        write_bytes(self.history_uri(environment), to_json(rewritten).encode())

    def deployed(self, environment: str) -> list[Deployed]:
        """The effective stack of promoted versions, oldest first; the last one is live."""
        return replay(self.events(environment))

    def champion(self, environment: str) -> tuple[Deployed, dict[str, Any]] | None:
        stack = self.deployed(environment)
        if not stack:
            return None
        record = self.read_record(stack[-1].record_id)
        uri = self.record_uri(stack[-1].record_id)
        # What the candidate is compared with (record.schema.json requires it): without it the champion gate said
        # "no model is promoted yet" and let any candidate through, or was a traceback with exit 1.
        metrics = record["lineage"].get("metrics")
        if not isinstance(metrics, dict) or not isinstance(metrics.get("test"), dict):
            raise PromotionError(
                f"promotion record {uri} (what {environment} serves) has no `lineage.metrics.test` object to "
                f"compare a candidate with: {_RESTORE}"
            )
        # The champion's age (the retraining pipeline's schedule condition): a hand-edited value that is no time
        # ended decide-retrain in a traceback, exit 1, after the data and drift checks.
        created = record.get("created")
        try:
            dt.datetime.fromisoformat(created if isinstance(created, str) else "")
        except ValueError:
            raise PromotionError(
                f"promotion record {uri} (what {environment} serves) has `created` {created!r}, not an ISO 8601 "
                f"time (promotion writes 2026-12-06T22:16:29Z): {_RESTORE}"
            ) from None
        return stack[-1], record


def replay(events: list[dict[str, Any]]) -> list[Deployed]:
    """The stack of promoted versions the events leave, oldest first; the last one is live."""
    stack: list[Deployed] = []
    for event in events:
        if event["action"] == "promote":
            stack.append(Deployed(str(event["version"]), event["record_id"], event.get("serving_image")))
        elif event["action"] == "rollback" and stack:
            stack.pop()
    return stack


def _bad_actions(events: Any) -> str:
    """The events whose action is not one this format has, for the damage message (a mistyped `"action": "promte"`
    reads as such, not as the work of a newer promotion)."""
    if not isinstance(events, list):
        return ""
    bad = [
        f"event {n} has action {e.get('action')!r}"
        for n, e in enumerate(events, 1)
        if isinstance(e, dict) and e.get("action") not in EVENT_ACTIONS
    ]
    return f" ({'; '.join(bad)})" if bad else ""


def _load(raw: bytes, uri: str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PromotionError(f"{what} {uri} is not valid JSON ({exc}): {_RESTORE}") from None
    if not isinstance(doc, dict):
        raise PromotionError(f"{what} {uri} is not a JSON object: {_RESTORE}")
    return doc
