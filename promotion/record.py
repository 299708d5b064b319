"""Assembling a promotion record from the evidence and the gate results, and checking its schema.

The record is the audit trail: what was decided, on which measured values against which
thresholds, about which exact inputs (hashes), by whom. Its schema is record.schema.json.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

from promotion import card, classes
from promotion.config import EnvironmentConfig, GateConfig
from promotion.errors import PromotionError
from promotion.evidence import Document, Evidence
from promotion.gates import DIGEST, GateResult
from promotion.store import RECORD_FORMAT, RECORD_SCHEMA

SCHEMA_PATH = Path(__file__).with_name("record.schema.json")


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def new_record_id(when: dt.datetime, environment: str, action: str, salt: str) -> str:
    """Sortable by time, readable, unique per decision (the salt hashes the inputs and a random nonce)."""
    env = re.sub(r"[^a-z0-9-]", "-", environment.lower())
    return f"{when:%Y%m%dT%H%M%SZ}-{env}-{action}-{salt[:8]}"


def code_revision(metadata: dict[str, Any] | None) -> str:
    """The revision the bundle was exported from, else the working tree's HEAD, else 'unknown'."""
    rev = (metadata or {}).get("git_revision")
    if rev:
        return str(rev)
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def image_ref(build_record: dict[str, Any] | None, which: str) -> str | None:
    """`name@sha256:...` when the build record has a digest; never a mutable tag."""
    image = ((build_record or {}).get("images") or {}).get(which) or {}
    pushed = image.get("reference")
    if image.get("pushed") and isinstance(pushed, str) and DIGEST.match(pushed.rpartition("@")[2]):
        return pushed  # `<registry>/<repo>@sha256:...`, what the push returned and a pull confirmed
    digest, name = image.get("digest"), image.get("name")
    if not (isinstance(digest, str) and DIGEST.match(digest) and name):
        return None
    repo = str(name)
    if ":" in repo.rsplit("/", 1)[-1]:  # drop a tag: the digest is the identity
        repo = repo.rsplit(":", 1)[0]
    return f"{repo}@{digest}"


def _sha(doc: Document | None) -> str | None:
    return doc.sha256 if doc else None


def build_record(
    *,
    action: str,
    evidence: Evidence,
    env: EnvironmentConfig,
    gates_cfg: GateConfig,
    results: list[GateResult],
    decision: str,
    reasons: list[str],
    model_name: str,
    registry_uri: str | None,
    champion: tuple[str, str] | None,
    requested_by: str | None,
    local_run: bool,
    when: dt.datetime | None = None,
) -> dict[str, Any]:
    when = when or now()
    metrics = evidence.metrics.data
    metadata = evidence.bundle_metadata.data if evidence.bundle_metadata else None
    build = evidence.build_record.data if evidence.build_record else None
    serving_image = image_ref(build, "serving")
    approval = evidence.approval.data if evidence.approval else None
    salt = "|".join(
        [evidence.metrics.sha256, _sha(evidence.bundle_metadata) or "", env.name, uuid.uuid4().hex]
    )
    deployable = decision == "promote" and serving_image is not None and not local_run

    return {
        "schema": RECORD_SCHEMA,
        "format_version": RECORD_FORMAT,
        "record_id": new_record_id(when, env.name, action, hashlib.sha256(salt.encode()).hexdigest()),
        "created": when.isoformat().replace("+00:00", "Z"),
        "action": action,
        "environment": env.name,
        "stack": env.stack,
        "decision": decision,
        "reasons": reasons,
        "deployable": deployable,
        "model": {
            "name": model_name,
            "version": None,  # set once registered
            "source": evidence.bundle_uri,
            "registry_uri": registry_uri,
            "alias": None,
        },
        "gates": [r.as_dict() for r in results],
        "thresholds": {"gates": dataclasses.asdict(gates_cfg), "environment": dataclasses.asdict(env)},
        "lineage": {
            "dataset_manifest_sha256": metrics.get("dataset_manifest_sha256"),
            # The classes the next candidate is compared on (promotion/classes.py).
            "labels": classes.of_manifest(evidence.manifest.data if evidence.manifest else None),
            "code_revision": code_revision(metadata),
            "training_image": image_ref(build, "training"),
            "serving_image": serving_image,
            "metrics": {
                k: metrics.get(k)
                for k in ("test", "validation", "baselines", "beats_tfidf", "epochs_run", "steps")
            },
            "export": {
                k: (metadata or {}).get(k)
                for k in ("model_name", "max_length", "opset", "parity", "quantization", "created")
            },
            "cost": evidence.cost.data if evidence.cost else None,
            "policy_report_sha256": _sha(evidence.policy_report),
            "bundle_metadata_sha256": _sha(evidence.bundle_metadata),
            "loadtest_sha256": _sha(evidence.loadtest),
            "build_record_sha256": _sha(evidence.build_record),
            "approver": (approval or {}).get("approver"),
            "approval": approval,
            "requested_by": requested_by,
            "champion": {"version": champion[0], "record_id": champion[1]} if champion else None,
            "inputs": evidence.inputs,
            "local_run": local_run,
        },
        "model_card": card.card_section(evidence.manifest.data if evidence.manifest else None, metrics),
    }


def rollback_record(
    *,
    restored: dict[str, Any],
    restored_version: str,
    from_version: str,
    from_record: str,
    reason: str,
    requested_by: str | None,
    registry_uri: str | None,
    when: dt.datetime | None = None,
) -> dict[str, Any]:
    """A rollback is a decision too: it documents the model that serves again, with why."""
    when = when or now()
    salt = f"{restored['record_id']}|{from_record}|{uuid.uuid4().hex}"
    lineage = dict(restored["lineage"])
    lineage.update(
        {
            "requested_by": requested_by,
            "rolled_back_from": {"version": from_version, "record_id": from_record},
            "restored_record_id": restored["record_id"],
        }
    )
    return {
        **restored,
        "record_id": new_record_id(
            when, restored["environment"], "rollback", hashlib.sha256(salt.encode()).hexdigest()
        ),
        "created": when.isoformat().replace("+00:00", "Z"),
        "action": "rollback",
        "decision": "rollback",
        "reasons": [f"rolled back from version {from_version} to {restored_version}: {reason}"],
        "model": {
            **restored["model"],
            "version": restored_version,
            "registry_uri": registry_uri,
            "alias": restored["environment"],
        },
        "lineage": lineage,
    }


def validate_record(record: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when the record does not follow record.schema.json."""
    import jsonschema

    jsonschema.validate(record, json.loads(SCHEMA_PATH.read_text()))


def check_restored(record: dict[str, Any], uri: str, environment: str, version: str) -> None:
    """The rollback record is the restored one with a new id: a value the schema here does not know (an enum a newer
    promotion added, a field a hand edit broke) is bad input naming the file, exit 2 before anything is written, not
    a jsonschema traceback (exit 1, read as a gate's no)."""
    import jsonschema

    try:
        validate_record(record)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise PromotionError(
            f"cannot roll {environment} back to version {version}: its record {uri} does not follow this "
            f"promotion's record.schema.json at {where}: {exc.message}. If a newer promotion wrote it, roll back "
            "with that version; otherwise restore the record from the bucket's object versions or a backup. "
            "Nothing was changed"
        ) from None
