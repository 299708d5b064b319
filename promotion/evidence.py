"""Reading the gate inputs: files produced by training, export, serving, policies and containers.

Every input is read through fsspec, so a candidate in a bucket (s3://, gs://, az://)
is read the same way as one on disk. A missing optional input is recorded as None
(its gate then fails and says which file to produce); a present but malformed one
raises EvidenceError (exit 2), because judging a broken file would hide the bug.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promotion.errors import EvidenceError


def join(base: str, *parts: str) -> str:
    """Join URI/path segments with '/', which fsspec accepts for local paths and buckets alike."""
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def absolute(uri: str) -> str:
    """Local paths become absolute (the record and the registry outlive the working directory)."""
    return uri if "://" in uri else str(Path(uri).resolve())


def read_bytes(uri: str) -> bytes | None:
    import fsspec  # lazy: `promotion --help` should not pay for s3fs/botocore

    fs, path = fsspec.core.url_to_fs(uri)
    try:
        with fs.open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_bytes(uri: str, data: bytes, *, exclusive: bool = False) -> None:
    """exclusive: write only if `uri` does not exist, else FileExistsError. fsspec's "xb" mode is each store's own
    create-only write: O_EXCL locally, S3's `If-None-Match: *`, GCS's `ifGenerationMatch=0`, Azure's
    `If-None-Match: *` (upload_blob(overwrite=False)); the store decides, so two writers cannot both win."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    parent = path.rsplit("/", 1)[0]
    if parent and parent != path:
        fs.makedirs(parent, exist_ok=True)
    with fs.open(path, "xb" if exclusive else "wb") as f:
        f.write(data)


def remove(uri: str) -> None:
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    fs.rm(path)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Document:
    """A JSON input with where it came from and the hash of its exact bytes (for the lineage)."""

    uri: str
    data: dict[str, Any]
    sha256: str


def read_json(uri: str | None, what: str, *, required: bool = False, fix: str = "") -> Document | None:
    if uri is None:
        return None
    raw = read_bytes(uri)
    if raw is None:
        if required:
            raise EvidenceError(what, uri, fix or "file not found")
        return None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EvidenceError(what, uri, f"not valid JSON ({exc}); regenerate it") from None
    if not isinstance(data, dict):
        raise EvidenceError(what, uri, "expected a JSON object at the top level")
    return Document(uri=uri, data=data, sha256=sha256(raw))


@dataclass(frozen=True, slots=True)
class Evidence:
    """Everything the gates judge, as read from disk or a bucket."""

    candidate_uri: str
    metrics: Document
    bundle_uri: str
    bundle_metadata: Document | None
    manifest: Document | None = None
    cost: Document | None = None
    loadtest: Document | None = None
    policy_report: Document | None = None
    build_record: Document | None = None
    approval: Document | None = None
    policy_plan_sha256: str | None = None
    """sha256 of the plan file the policy report names, as that file is now (None: not on this machine)."""
    policy_plan_note: str | None = None
    """Why the report's plan could not be compared (None: it was, or there is no report)."""
    policy_waivers_now: tuple[str | None, str | None] = (None, None)
    """waivers_now() of the report, resolved against the report's own folders (the gate's `waivers_now`)."""
    inputs: dict[str, str | None] = field(default_factory=dict)
    """Where each input was looked for (also for the ones not found)."""


def load_evidence(
    candidate: str,
    *,
    bundle: str | None = None,
    loadtest: str | None = None,
    policy_report: str | None = None,
    build_record: str | None = None,
    approval: str | None = None,
) -> Evidence:
    """Read a training output folder (metrics.json, manifest.json, cost.json, export/) and the other reports."""
    candidate = absolute(candidate)
    bundle_uri = absolute(bundle) if bundle else join(candidate, "export")
    metrics = read_json(
        join(candidate, "metrics.json"),
        "training metrics",
        required=True,
        fix="point --candidate at a `python -m training train --output DIR` folder",
    )
    assert metrics is not None
    inputs = {
        "candidate": candidate,
        "bundle": bundle_uri,
        "loadtest": loadtest,
        "policy_report": policy_report,
        "build_record": build_record,
        "approval": approval,
    }
    report = read_json(policy_report, "policy report")
    plan_sha256, plan_note = _plan_now(report)
    return Evidence(
        candidate_uri=candidate,
        metrics=metrics,
        bundle_uri=bundle_uri,
        bundle_metadata=read_json(join(bundle_uri, "metadata.json"), "export bundle metadata"),
        manifest=read_json(join(candidate, "manifest.json"), "dataset manifest"),
        cost=read_json(join(candidate, "cost.json"), "cost record"),
        loadtest=read_json(loadtest, "load test report"),
        policy_report=report,
        policy_plan_sha256=plan_sha256,
        policy_plan_note=plan_note,
        policy_waivers_now=waivers_now(report.data, report.uri) if report else (None, None),
        build_record=read_json(build_record, "image build record"),
        approval=read_json(
            approval, "approval record", required=True, fix="the approval file given does not exist"
        ),
        inputs=inputs,
    )


def _plan_now(report: Document | None) -> tuple[str | None, str | None]:
    """The plan the report was made from, hashed as it is now: a plan changed since (infra edited, `make plan` run
    again, `make policy` forgotten) makes the report stale evidence. Returns (sha256, None), or (None, why the plan
    could not be compared)."""
    if report is None:
        return None, None
    plan = report.data.get("plan")
    if not isinstance(plan, str) or not plan or not report.data.get("plan_sha256"):
        return (
            None,
            "the report names no plan and plan_sha256 (made before they were recorded: run `make policy`)",
        )
    plan_file = report.data.get("plan_file")
    candidates = plan_candidates(plan, report.uri, plan_file if isinstance(plan_file, str) else None)
    for where in candidates:
        raw = read_bytes(where)
        if raw is not None:
            return sha256(raw), None
    return None, (
        f"its plan {plan} is not on this machine (looked in {', '.join(candidates)}): "
        "run where `make plan` rendered it, or pass the report of the plan you deploy"
    )


def waivers_now(report: Mapping[str, Any], report_uri: str) -> tuple[str | None, str | None]:
    """The waivers file that judged the report (policies.analyze records `waivers_path` (as given), `waivers_file`,
    `waivers_sha256` of the bytes it read), hashed as it is now: a waiver revoked or narrowed since makes the
    report stale evidence. Looked for as the plan is (plan_candidates, from the report's own folders). Returns
    (sha256, None); "" when the pack's own file was absent then and no file is there now; or (None, why it could
    not be compared)."""
    recorded = report.get("waivers_sha256")
    if not isinstance(recorded, str):
        return None, "the report records no waivers_sha256 (made before it was recorded: run `make policy`)"
    given, waivers_file = report.get("waivers_path"), report.get("waivers_file")
    if not isinstance(given, str) or not given:
        return None, "the report names no waivers file: run `make policy`"
    recorded_file = waivers_file if isinstance(waivers_file, str) and waivers_file else None
    candidates = plan_candidates(given, report_uri, recorded_file)
    for where in candidates:
        try:
            raw = read_bytes(where)
        except (IsADirectoryError, PermissionError):
            continue
        if raw is not None:
            return sha256(raw), None
    if recorded == "":
        return "", None  # no waivers file then, none now
    return None, f"its waivers file {given} is not on this machine (looked in {', '.join(candidates)})"


def utc_today() -> dt.date:
    """The day a waiver's end is judged on: today in UTC (a waiver holds through its `expires` day in UTC), the
    rule of policies.waivers.utc_today, duplicated because the training image that runs promotion ships no
    policies/ (tests/policies/test_policy_waivers_clock.py holds the two to the same day). date.today(), the
    machine's local date, let a CI runner in UTC and a laptop in Europe/Madrid disagree around midnight."""
    return dt.datetime.fromtimestamp(time.time(), dt.UTC).date()


def lapsed_waivers(waived: Any, today: dt.date) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(finding, waiver) for each mandatory waived finding whose waiver ended before `today` (a waiver applies
    through its `expires` day, as policies/waivers.py says). A waiver with no readable end date counts as ended:
    acceptance that cannot be read is no acceptance."""
    lapsed = []
    for v in waived if isinstance(waived, list) else []:
        if not isinstance(v, dict) or v.get("enforcement") != "mandatory":
            continue
        found = v.get("waiver")
        waiver: dict[str, Any] = found if isinstance(found, dict) else {}
        try:
            ended = dt.date.fromisoformat(str(waiver.get("expires"))) < today
        except ValueError:
            ended = True
        if ended:
            lapsed.append((v, waiver))
    return lapsed


def plan_candidates(plan: str, report_uri: str, plan_file: str | None = None) -> list[str]:
    """Where the plan a report names may be. `plan_file`, the absolute path policies.analyze records since it
    keeps other stacks' results (policies/results.py), comes first. `plan` is the path as it was given, so a
    relative one is relative to the folder analyze ran in: `make policy` runs at the repository root and writes
    the reports under it (reports/policy/<stack>.json names reports/plan/<stack>.json), so that folder is one of
    the report's own ancestors, nearest first; the working directory comes last (analyze and promotion run in one
    folder). The report itself is never its plan: `analyze dev.json --out ../policy` run in reports/plan names
    `dev.json`, which the report's own folder would otherwise resolve to the report, read as a changed plan."""
    found: list[str] = [plan_file] if plan_file and "://" not in report_uri else []
    if "://" in plan or Path(plan).is_absolute():
        found.append(plan)
    else:
        if "://" not in report_uri:
            found += [str(folder / plan) for folder in Path(report_uri).resolve().parents]
        found.append(str(Path(plan).resolve()))
    itself = str(Path(report_uri).resolve()) if "://" not in report_uri else report_uri
    unique: list[str] = []
    for where in found:
        if where not in unique and where != itself:
            unique.append(where)
    return unique
