"""What a promotion operation returns: its record, where it was written, and what to deploy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Outcome:
    record: dict[str, Any]
    record_uri: str | None
    deploy: dict[str, Any] | None
    """What the pipeline deploys: stack, model version, serving image by digest (None when rejected)."""
    unfinished: str | None = None
    """Done, but something after it was not (the drift reference not written): the message, with what to run (exit 2)."""
    drift_reference: dict[str, Any] | None = None
    """The drift reference written once done (drift_reference.ATTACHMENT's content); None when none was asked for or
    it was not written."""


def deploy_summary(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "environment": record["environment"],
        "stack": record["stack"],
        "model_name": record["model"]["name"],
        "model_version": record["model"]["version"],
        "serving_image": record["lineage"]["serving_image"],
        "deployable": record["deployable"],
        "record_id": record["record_id"],
    }
