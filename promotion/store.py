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

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from promotion.errors import PromotionError
from promotion.evidence import join, read_bytes, write_bytes

DEFAULT_STORE = "runs/model-store"


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
        uri = self.record_uri(record_id)
        raw = read_bytes(uri)
        if raw is None:
            raise PromotionError(f"record {uri} not found: is --store the same as at promotion?")
        record = _load(raw, uri, "promotion record")
        # Champion metrics, lineage and rollbacks are read from here: a hand-edited record must fail as bad input
        # (exit 2, naming the file), not as a KeyError that exits 1 like a gate's rejection.
        if not isinstance(record.get("lineage"), dict):
            raise PromotionError(f"promotion record {uri} has no `lineage` object: {_RESTORE}")
        return record

    def events(self, environment: str) -> list[dict[str, Any]]:
        uri = self.history_uri(environment)
        raw = read_bytes(uri)
        if raw is None:
            return []
        events = _load(raw, uri, "promotion history").get("events")
        if not isinstance(events, list) or not all(
            isinstance(e, dict)
            and e.get("action") in ("promote", "rollback")
            and e.get("record_id")
            and "version" in e
            for e in events
        ):
            raise PromotionError(
                f"promotion history {uri}: `events` must be a list of promote/rollback events with version and "
                f"record_id: {_RESTORE}"
            )
        return list(events)

    def append_event(self, environment: str, event: dict[str, Any]) -> None:
        # Read-modify-write: object stores have no append. promote() and rollback() hold the environment's
        # lock (promotion/lock.py) around it, so no concurrent writer can lose an event.
        events = [*self.events(environment), event]
        write_bytes(
            self.history_uri(environment),
            to_json({"environment": environment, "events": events}).encode(),
        )

    def deployed(self, environment: str) -> list[Deployed]:
        """The effective stack of promoted versions, oldest first; the last one is live."""
        stack: list[Deployed] = []
        for event in self.events(environment):
            if event["action"] == "promote":
                stack.append(Deployed(str(event["version"]), event["record_id"], event.get("serving_image")))
            elif event["action"] == "rollback" and stack:
                stack.pop()
        return stack

    def champion(self, environment: str) -> tuple[Deployed, dict[str, Any]] | None:
        stack = self.deployed(environment)
        if not stack:
            return None
        return stack[-1], self.read_record(stack[-1].record_id)


def _load(raw: bytes, uri: str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PromotionError(f"{what} {uri} is not valid JSON ({exc}): {_RESTORE}") from None
    if not isinstance(doc, dict):
        raise PromotionError(f"{what} {uri} is not a JSON object: {_RESTORE}")
    return doc
