"""The champion scored on the candidate's own test rows, so that `not-worse-than-champion` compares like with like.

A candidate's `test.<metric>` is measured on the test split of its own dataset manifest; the champion's recorded one on
the test split of the data it was trained on. The pipeline retrains exactly when those differ (new rows: another
hash-split test set; drift): a harder new test set made every candidate lose against a number measured on easier
rows, an easier one let a worse model through. So when the two manifests differ, the champion's own export bundle
(the one its record audited: `lineage.bundle_metadata_sha256`) is run on the candidate's test split and the gate
compares that score with the candidate's. The result travels in the candidate's metrics.json as
`champion_rescored`, naming the champion's bundle (by its metadata sha256) and the manifest it was made for: a
rescoring of another model, or for other data, is not used; one made against dev's champion holds in staging and prod
while they serve that same bundle.

    python -m promotion rescore --env dev --candidate runs/demo/train     (where the candidate's data is readable)

Scoring reuses what training uses: the split as training cut it (monitoring.reference.split_texts, checked against
the manifest), the bundle's tokenizer and ONNX graph as the export's parity check runs them
(training.export_parity.onnx_logits, fp32 `model.onnx`, the graph that was parity-checked against the PyTorch model
training scored), and training.metrics.scores, the one definition of the numbers in metrics.json.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promotion.errors import PromotionError
from promotion.evidence import join, read_bytes, sha256, write_bytes

KEY = "champion_rescored"
"""The field of metrics.json (and of the pipeline's evaluate.json) holding the rescoring."""
SPLIT = "test"


class RescoreError(PromotionError):
    """The champion could not be scored on the candidate's test rows (exit 2): its bundle is gone or is not the one
    its record names, or the candidate's data no longer matches its manifest. The message names what and the fix."""


def manifest_of(record: dict[str, Any]) -> str | None:
    value = (record.get("lineage") or {}).get("dataset_manifest_sha256")
    return value if isinstance(value, str) and value else None


def needed(metrics: dict[str, Any], champion: dict[str, Any] | None) -> bool:
    """The champion's recorded test metric is not on the candidate's test rows: their manifests differ, or one is
    unknown (then no one can say they are the same rows)."""
    if champion is None:
        return False
    ours = metrics.get("dataset_manifest_sha256")
    return not (isinstance(ours, str) and ours and ours == manifest_of(champion))


def bundle_of(record: dict[str, Any]) -> str | None:
    """The champion's export bundle: the source its registry version was created from (the published copy in the
    store, on the cluster)."""
    source = (record.get("model") or {}).get("source") or (
        (record.get("lineage") or {}).get("inputs") or {}
    ).get("bundle")
    return source if isinstance(source, str) and source else None


def fix_command(candidate: str, environment: str, store: str, model: str) -> str:
    return (
        f"`python -m promotion rescore --env {environment} --candidate {candidate} --store {store} "
        f"--model-name {model} [--config FILE]` where the candidate's data is readable (the pipeline's evaluate step does it)"
    )


def unusable(rescored: Any, champion: dict[str, Any], manifest_sha256: Any) -> str | None:
    """Why `rescored` (metrics.json's field) does not score THIS champion on THIS candidate's test rows, or None."""
    if rescored is None:
        return "no rescoring of the champion on the candidate's test split is recorded"
    if not isinstance(rescored, dict) or not isinstance(rescored.get("metrics"), dict):
        return f"metrics.json {KEY} is not an object with `metrics`"
    # The score is a function of the champion's bundle and the candidate's rows only: a rescoring made against the
    # dev champion holds for staging and prod when they serve the same bundle (the record ids differ per
    # environment), and not when the champion there is another model.
    if rescored.get("manifest_sha256") != manifest_sha256:
        return f"metrics.json {KEY} was made on the test split of manifest {str(rescored.get('manifest_sha256'))[:12]}, not the candidate's {str(manifest_sha256)[:12]}"
    recorded = (champion.get("lineage") or {}).get("bundle_metadata_sha256")
    if rescored.get("bundle_metadata_sha256") != recorded:
        return f"metrics.json {KEY} scored a bundle other than the champion's (metadata sha256 {str(rescored.get('bundle_metadata_sha256'))[:12]}, the record names {str(recorded)[:12]})"
    return None


@dataclass(frozen=True, slots=True)
class Versus:
    """What `not-worse-than-champion` compares the candidate with."""

    metrics: dict[str, Any] | None
    """The champion's numbers, as metrics.json has them ({"test": {...}}): recorded, or rescored on the candidate's
    test rows. None: no champion."""
    basis: str = ""
    """How they were measured, for the gate's detail."""
    incomparable: str | None = None
    """Why no like-for-like number exists: the gate fails with it (fail closed, never a silent comparison)."""


def versus(metrics: dict[str, Any], champion: dict[str, Any] | None, *, fix: str) -> Versus:
    if champion is None:
        return Versus(None)
    recorded = (champion.get("lineage") or {}).get("metrics")
    if not needed(metrics, champion):
        return Versus(recorded)  # the same test rows: the recorded number is the like-for-like one
    rescored = metrics.get(KEY)
    why = unusable(rescored, champion, metrics.get("dataset_manifest_sha256"))
    if why is None and isinstance(rescored, dict):
        return Versus(
            {"test": rescored["metrics"]},
            f" (champion's bundle rescored on the candidate's {rescored.get('rows')} test rows)",
        )
    theirs, ours = manifest_of(champion), metrics.get("dataset_manifest_sha256")
    return Versus(
        recorded,
        incomparable=(
            f"the candidate was tested on the data of manifest {str(ours)[:12]}, the champion's recorded metric on "
            f"that of {str(theirs)[:12]}: different test rows, not comparable, and {why}. Score the champion on the "
            f"candidate's test split: {fix}"
        ),
    )


@contextlib.contextmanager
def _local(bundle: str) -> Iterator[Path]:
    """The bundle as a folder of this machine (ONNX Runtime and the tokenizer read files): a copy when it is in a
    bucket."""
    if "://" not in bundle or bundle.startswith("file://"):
        yield Path(bundle.removeprefix("file://"))
        return
    import fsspec

    with tempfile.TemporaryDirectory(prefix="champion-bundle-") as tmp:
        fs, path = fsspec.core.url_to_fs(bundle)
        fs.get(path.rstrip("/") + "/", tmp, recursive=True)
        yield Path(tmp)


def _champion_bundle(record: dict[str, Any], folder: Path, where: str) -> tuple[list[str], int]:
    """(labels, max_length) of the champion's bundle, once its metadata.json is the one the record audited: a folder
    reused by a later run (a local WORK) must not be scored in the champion's name."""
    meta_file = folder / "metadata.json"
    if not meta_file.is_file():
        raise FileNotFoundError(f"{meta_file} does not exist")
    raw = meta_file.read_bytes()
    want = (record.get("lineage") or {}).get("bundle_metadata_sha256")
    if sha256(raw) != want:
        raise RescoreError(
            f"the bundle at {where} is not the one champion record {record.get('record_id')} promoted (metadata.json "
            f"sha256 {sha256(raw)[:12]}, the record names {str(want)[:12]}): it was replaced since. Restore the "
            "champion's bundle there (the bucket's object versions, or a backup) and rerun"
        )
    meta = json.loads(raw)
    labels = json.loads((folder / "labels.json").read_text(encoding="utf-8"))
    return [str(x) for x in labels], int(meta["max_length"])


def rescore(record: dict[str, Any], candidate: Path, *, environment: str) -> dict[str, Any]:
    """The champion `record`'s bundle scored on the test split of `candidate`/manifest.json (a local training output
    folder): the `champion_rescored` object."""
    import numpy as np
    from scipy.special import softmax

    from monitoring.errors import InputError
    from monitoring.reference import split_texts
    from training.export_parity import onnx_logits
    from training.metrics import scores

    bundle = bundle_of(record)
    if bundle is None:
        raise RescoreError(
            f"champion record {record.get('record_id')} in {environment} names no bundle (model.source)"
        )
    manifest_file = candidate / "manifest.json"
    try:
        # whole=False: exactly the rows the candidate's test metric was computed on (a preset's limit included).
        texts, labels, manifest = split_texts(manifest_file, SPLIT, whole=False)
    except InputError as exc:
        raise RescoreError(f"the candidate's test split ({manifest_file}): {exc}") from None
    try:
        with _local(bundle) as folder:
            served, max_length = _champion_bundle(record, folder, bundle)
            if served != [str(x) for x in manifest["labels"]]:
                raise RescoreError(
                    f"the champion's bundle classifies into {served}, the candidate's data into {manifest['labels']}: "
                    "not comparable (the classes check of not-worse-than-champion says what to do)"
                )
            import transformers

            tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder / "tokenizer"))
            logits = onnx_logits(folder / "model.onnx", tokenizer, texts, max_length)
    except RescoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - fsspec, ONNX Runtime and tokenizers each raise their own kinds
        raise RescoreError(
            f"cannot read champion record {record.get('record_id')}'s bundle {bundle} ({type(exc).__name__}: {exc}): "
            "check that it exists and can be read from here (the store's credentials); restore it from the bucket's "
            "object versions or a backup if it was deleted. Without it the champion cannot be compared on the "
            "candidate's test rows, and the candidate is not judged"
        ) from exc
    measured = scores(labels, softmax(np.asarray(logits, dtype=np.float64), axis=1))
    return {
        "champion": {
            "record_id": record.get("record_id"),
            "version": (record.get("model") or {}).get("version"),
        },
        "environment": environment,
        "bundle": bundle,
        "bundle_metadata_sha256": (record.get("lineage") or {}).get("bundle_metadata_sha256"),
        "champion_manifest_sha256": manifest_of(record),
        "manifest_sha256": manifest["sha256"],
        "split": SPLIT,
        "split_sha256": manifest["splits"][SPLIT]["sha256"],
        "rows": len(texts),
        # null, not NaN (strict JSON, as records are): a split of one class has no AUC.
        "metrics": {k: (v if math.isfinite(v) else None) for k, v in measured.items()},
        "scored_with": "onnxruntime, model.onnx (fp32)",
    }


def for_candidate(
    candidate: str, *, champion: dict[str, Any] | None, environment: str
) -> dict[str, Any] | None:
    """Rescore when needed and write the result into the candidate's metrics.json (a folder or a bucket prefix): the
    pipeline's evaluate step and `python -m promotion rescore`. None when there is nothing to rescore: no champion,
    the same data, or other classes (not comparable at all: the gate's classes check refuses)."""
    from promotion import classes
    from promotion.evidence import read_json

    doc = read_json(join(candidate, "metrics.json"), "training metrics", required=True)
    assert doc is not None
    metrics = doc.data
    if not needed(metrics, champion):
        return None
    assert champion is not None
    raw = read_bytes(join(candidate, "manifest.json"))
    if raw is None:
        raise RescoreError(
            f"{join(candidate, 'manifest.json')} does not exist: point --candidate at a training run"
        )
    manifest = json.loads(raw)
    if classes.mismatch(classes.of_manifest(manifest), classes.of_record(champion), environment):
        return None
    if manifest.get("sha256") != metrics.get("dataset_manifest_sha256"):
        raise RescoreError(
            f"{candidate}: manifest.json and metrics.json name different datasets: they come from different runs"
        )
    with tempfile.TemporaryDirectory(prefix="candidate-") as tmp:
        Path(tmp, "manifest.json").write_bytes(raw)
        rescored = rescore(champion, Path(tmp), environment=environment)
    metrics[KEY] = rescored
    data, target = (json.dumps(metrics, indent=2) + "\n").encode(), join(candidate, "metrics.json")
    if "://" in target:
        write_bytes(target, data)  # one object put: readers see the old or the new file
    else:  # a run killed mid-write must not leave the candidate without its metrics
        partial = Path(target).with_name(".metrics.json.rescore.tmp")
        partial.write_bytes(data)
        os.replace(partial, target)
    return rescored
