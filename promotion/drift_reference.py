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

Records are immutable and written before the reference (the promotion must stand first), so a record cannot say the
reference was written: that is said beside it, in `RECORD_ID.drift-reference.json` (`ATTACHMENT`), written only once
the reference is, by the promotion or rollback, or by `python -m promotion reference` for the record it served.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promotion import interrupted
from promotion.errors import PromotionError
from promotion.evidence import join
from promotion.outcome import Outcome

FILE = "reference.jsonl"
"""The file written under a prefix: the drift job reads every .jsonl there."""

ATTACHMENT = "drift-reference.json"
"""Beside the record whose version's reference was written (`store.write_attachment`): present only once written."""


@dataclass(frozen=True, slots=True)
class Prepared:
    location: str
    """As given: a prefix (folder or bucket URL) or a .jsonl file."""
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    """What `ATTACHMENT` says once the records are written (uri, manifest, bundle, rows, model, model_version)."""


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


def prepare(
    location: str,
    *,
    candidate: str | None,
    bundle: str | None,
    rows: int | None = None,
    record: dict[str, Any] | None = None,
) -> Prepared:
    """The reference records of the training run `candidate` (its manifest.json) and its export `bundle`, for
    `location`. `record`: the promotion record they must still be (its lineage hashes; a rollback or a rerun reads
    the folders long after). Exit 2 (PromotionError) naming what could not be read; nothing is written."""
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
            if record is not None:
                _same_as_recorded(record, manifest_file, bundle_dir, manifest, bundle, location)
            records = reference.build(manifest_file, bundle_dir, rows=rows or reference.DEFAULT_ROWS)
    except PromotionError:
        raise
    except Exception as exc:  # noqa: BLE001 - monitoring's InputError, fsspec's and the SDKs' errors, ONNX Runtime's
        # monitoring's own advice ("pass --data-encoding") names a flag promotion does not have.
        why = str(exc).split("; pass --data-encoding", 1)[0]
        raise PromotionError(
            f"the drift reference for {location} cannot be built from {manifest} and {bundle} "
            f"({type(exc).__name__}: {why}): run this where the run's data and bundle can be read, or leave "
            "--drift-reference out. Promotion reads the data as UTF-8: for a CSV in another encoding, build it by "
            f"hand (python -m monitoring reference --manifest {manifest} --bundle {bundle} --data-encoding ENCODING "
            f"--out {FILE}) and copy it to {target(location)}"
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


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _same_as_recorded(
    record: dict[str, Any], manifest_file: Path, bundle_dir: Path, manifest: str, bundle: str, location: str
) -> None:
    """Refuse a run folder or bundle replaced since `record` promoted it (a local WORK re-exported as a later
    version): its reference would be written in the recorded version's name (as rescore.py refuses to score it)."""
    lineage = record.get("lineage") or {}
    differ = []
    want = lineage.get("bundle_metadata_sha256")
    got = _sha256(bundle_dir / "metadata.json")
    if want and got != want:
        differ.append(f"{join(bundle, 'metadata.json')} sha256 {str(got)[:12]}, the record names {want[:12]}")
    want = lineage.get("dataset_manifest_sha256")
    if want:
        try:
            got = json.loads(manifest_file.read_text(encoding="utf-8")).get("sha256")
        except (OSError, ValueError, AttributeError):
            got = None
        if got != want:
            differ.append(f"{manifest} names data manifest {str(got)[:12]}, the record {want[:12]}")
    if differ:
        raise PromotionError(
            f"the drift reference for {location}: the run is not the one record {record.get('record_id')} promoted "
            f"({'; '.join(differ)}): it was replaced since, and its reference would be another model's. Restore "
            "that run there (the bucket's object versions, or a backup) and rerun, or build the reference by hand "
            f"from the recorded run and copy it to {target(location)}"
        )


def for_record(record: dict[str, Any], location: str) -> Prepared:
    """The reference of the version a promotion or rollback record serves (its training run and bundle), once they
    are still what the record promoted."""
    inputs = (record.get("lineage") or {}).get("inputs") or {}
    bundle = inputs.get("bundle") or (record.get("model") or {}).get("source")
    return prepare(location, candidate=inputs.get("candidate"), bundle=bundle, record=record)


def publish_for(prepared: Prepared, store: Any, record_id: str, by: str) -> dict[str, Any]:
    """`publish`, then `ATTACHMENT` beside record `record_id` saying so: what was written (PromotionError when
    either fails: the message says which)."""
    from promotion.store import to_json

    uri = publish(prepared)
    written = {**prepared.summary, "uri": uri, "written_at": _now(), "by": by}
    try:
        store.write_attachment(record_id, ATTACHMENT, to_json(written).encode())
    except Exception as exc:  # noqa: BLE001 - the store's own errors (OSError, the SDKs')
        raise PromotionError(
            f"the file was, but the note saying so ({ATTACHMENT}) could not be kept beside record {record_id} "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    return written


def written_after(
    outcome: Outcome, prepared: Prepared, *, done: str, environment: str, store: Any, by: str
) -> Outcome:
    """The reference written once the promotion or rollback `done` stands, inside its `interrupted.writes_held`: a
    Ctrl-C or SIGTERM meanwhile waits for it. A write that fails does not undo anything: the outcome is `unfinished`
    with the command that writes it (exit 2); stopped while writing, the same message is printed before the
    interruption goes on."""
    try:
        written = publish_for(prepared, store, outcome.record["record_id"], by)
    except PromotionError as exc:
        why = not_written(done, prepared.location, str(exc), environment, store)
        return dataclasses.replace(outcome, unfinished=why)
    except interrupted.STOPPED as stop:
        signal = "SIGINT" if isinstance(stop, KeyboardInterrupt) else "SIGTERM"
        why = not_written(
            done, prepared.location, f"stopped by {signal} while writing it", environment, store
        )
        print(f"promotion: {why}", file=sys.stderr, flush=True)
        raise
    return dataclasses.replace(outcome, drift_reference=written)


def told_when_stopped(outcome: Outcome | None) -> None:
    """On the way out of an interruption held until the writes were done: what `outcome` left undone (the drift
    reference's command), which the CLI would have printed had it returned."""
    if outcome is not None and outcome.unfinished:
        print(f"promotion: {outcome.unfinished}", file=sys.stderr, flush=True)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
            written = publish_for(prepared, store, current[0].record_id, "reference")
        except PromotionError as exc:
            raise PromotionError(f"the drift reference was not written: {exc}") from None
    print(shown(written))
    return 0
