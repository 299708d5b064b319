"""A model's classes (its label names in class-id order): the candidate's from its split manifest, the champion's
from its promotion record. Two models of other classes, or of the same classes numbered otherwise, answer callers
differently and are scored on different tasks: their metrics are not comparable."""

from __future__ import annotations

from typing import Any


def of_manifest(manifest: dict[str, Any] | None) -> list[str] | None:
    labels = (manifest or {}).get("labels")
    return [str(x) for x in labels] if isinstance(labels, list) and labels else None


def of_record(record: dict[str, Any] | None) -> list[str] | None:
    """None for a record written before the classes were recorded (lineage.labels)."""
    labels = ((record or {}).get("lineage") or {}).get("labels")
    return [str(x) for x in labels] if isinstance(labels, list) and labels else None


def compared(manifest: Any, champion: dict[str, Any] | None) -> dict[str, list[str] | None]:
    """gates.not_worse_than_champion's `classes` and `champion_classes`: of the candidate's manifest (a Document
    or None) and of the champion's record."""
    return {"classes": of_manifest(getattr(manifest, "data", None)), "champion_classes": of_record(champion)}


def mismatch(candidate: list[str] | None, champion: list[str] | None, environment: str) -> str | None:
    """Why the candidate cannot be compared with the champion, or None (same classes, or one side unknown)."""
    if candidate is None or champion is None or candidate == champion:
        return None
    what = (
        "the same classes in another class-id order"
        if sorted(candidate) == sorted(champion)
        else "other classes"
    )
    return (
        f"the candidate classifies into {candidate}, the champion in {environment} into {champion} ({what}): "
        "their test metrics are not comparable, and the endpoint's answers would change meaning for its callers; "
        "promote it under a model name of its own (--model-name: its own history, no champion) and tell the callers"
    )
