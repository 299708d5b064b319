"""The drift reference a promotion publishes: the promoted run's reference records, where the environment's drift job
reads them (`--drift-reference`; the stack's is its models bucket's `reference/` prefix).

The scheduled drift job refuses (exit 2) a window of records written by another model than its reference's
(monitoring/drift.py). Nothing wrote that reference when a model was promoted, so after each promotion the job
failed until someone rebuilt it by hand (before that check, it judged the new model against the old reference).

The records are monitoring's own (`monitoring.reference.build`: the run's validation split through its bundle, as
serving describes requests) and are written by monitoring's writers, which replace the file only once complete
(`write_jsonl`; an object-storage prefix gets a finished file uploaded by `outputs.staged`): the drift job reads the
previous reference or the new one, never half of one. They are built before anything is promoted (a run whose data
or bundle cannot be read is refused while nothing changed) and written only once the promotion is done: a refused
or failed promotion leaves the previous reference as it was.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promotion.errors import PromotionError
from promotion.evidence import join

FILE = "reference.jsonl"
"""The file written under a prefix: the drift job reads every .jsonl there."""


@dataclass(frozen=True, slots=True)
class Prepared:
    location: str
    """As given: a prefix (folder or bucket URL) or a .jsonl file."""
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    """What the promotion record names (`drift_reference` in record.schema.json)."""


def target(location: str) -> str:
    """The file `location` means: itself when it is a .jsonl, else `reference.jsonl` under that prefix."""
    local = location.removeprefix("file://")
    return local if local.endswith(".jsonl") else join(local, FILE)


def rerun_command(environment: str, location: str, store: str, model: str) -> str:
    return (
        f"python -m promotion reference --env {environment} --drift-reference {location} --store {store} "
        f"--model-name {model}"
    )


@contextlib.contextmanager
def _on_disk(uri: str) -> Iterator[Path]:
    """`uri` (a file or a folder) on this machine: ONNX Runtime and the tokenizer read files. A copy when in a bucket."""
    if "://" not in uri or uri.startswith("file://"):
        yield Path(uri.removeprefix("file://"))
        return
    import fsspec

    with tempfile.TemporaryDirectory(prefix="drift-reference-") as tmp:
        fs, path = fsspec.core.url_to_fs(uri)
        local = Path(tmp) / (path.rstrip("/").rsplit("/", 1)[-1] or "copy")
        if fs.isdir(path):
            local.mkdir()
            fs.get(path.rstrip("/") + "/", str(local), recursive=True)
        else:
            fs.get(path, str(local))
        yield local


def prepare(location: str, *, candidate: str | None, bundle: str | None, rows: int | None = None) -> Prepared:
    """The reference records of the training run `candidate` (its manifest.json) and its export `bundle`, for
    `location`. Exit 2 (PromotionError) naming what could not be read; nothing is written."""
    from monitoring import reference

    if not candidate or not bundle:
        raise PromotionError(
            "its record names no training run and bundle (lineage.inputs.candidate, model.source) to build the "
            "drift reference from: build it by hand (python -m monitoring reference --manifest RUN/manifest.json "
            f"--bundle RUN/export --out {FILE}) and copy it to {target(location)}"
        )
    manifest = join(candidate, "manifest.json")
    try:
        with _on_disk(manifest) as manifest_file, _on_disk(bundle) as bundle_dir:
            records = reference.build(manifest_file, bundle_dir, rows=rows or reference.DEFAULT_ROWS)
    except Exception as exc:  # noqa: BLE001 - monitoring's InputError, fsspec's and the SDKs' errors, ONNX Runtime's
        raise PromotionError(
            f"the drift reference for {location} cannot be built from {manifest} and {bundle} "
            f"({type(exc).__name__}: {exc}): run this where the run's data and bundle can be read, or leave "
            "--drift-reference out"
        ) from exc
    if not records:
        raise PromotionError(
            f"the drift reference for {location}: {manifest} names an empty validation split, which no drift job can "
            "judge against: leave --drift-reference out, or promote a run with validation rows"
        )
    first = records[0]
    return Prepared(
        location,
        records,
        {
            "uri": target(location),
            "manifest": manifest,
            "bundle": bundle,
            "rows": len(records),
            "model": first.get("model"),
            "model_version": first.get("model_version"),
        },
    )


def publish(prepared: Prepared) -> str:
    """Write the records to their target with monitoring's writers (replaced whole, never half); returns the URI."""
    from monitoring import outputs
    from monitoring.reference import write_jsonl

    uri = prepared.summary["uri"]
    try:
        if outputs.is_url(uri):
            prefix, name = uri.rsplit("/", 1)
            with outputs.staged(prefix) as folder:
                write_jsonl(prepared.records, folder / name)
        else:
            write_jsonl(prepared.records, Path(uri))
    except Exception as exc:  # noqa: BLE001 - monitoring's InputError names the file; an SDK's own types too
        raise PromotionError(f"{type(exc).__name__}: {exc}") from exc
    return str(uri)


def not_written(done: str, location: str, error: str, environment: str, store: Any) -> str:
    """The message of a promotion or rollback that is done but left the drift reference behind (exit 2)."""
    return (
        f"{done}, but its drift reference was not written to {target(location)}: {error}. Until it is, "
        f"{environment}'s drift job judges the served model against the previous model's reference and refuses "
        f"(exit 2). Nothing was undone; write the reference: "
        f"{rerun_command(environment, location, store.root, store.model)}"
    )


def for_record(record: dict[str, Any], location: str) -> Prepared:
    """The reference of the version a promotion or rollback record serves (its training run and bundle)."""
    inputs = (record.get("lineage") or {}).get("inputs") or {}
    bundle = inputs.get("bundle") or (record.get("model") or {}).get("source")
    return prepare(location, candidate=inputs.get("candidate"), bundle=bundle)


def shown(written: dict[str, Any]) -> str:
    return (
        f"drift reference: {written['uri']} ({written['rows']} records of model={written['model']} "
        f"model_version={written['model_version']})"
    )


def command(environment: str, location: str, store: Any) -> int:
    """`python -m promotion reference`: the reference of what `environment` serves now, written to `location` (the
    command a promotion or rollback names when it could not write it)."""
    from promotion.lock import held

    # Under the environment's lock: a promotion finishing meanwhile would have its reference replaced by this one.
    with held(store.root, store.model, environment, operation="reference", requested_by=None):
        current = store.champion(environment)
        if current is None:
            raise PromotionError(
                f"{environment} serves nothing yet ({store.history_uri(environment)}): no drift reference to write"
            )
        prepared = for_record(current[1], location)
        try:
            publish(prepared)
        except PromotionError as exc:
            raise PromotionError(f"the drift reference was not written: {exc}") from None
    print(shown(prepared.summary))
    return 0
