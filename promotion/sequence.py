"""Gates that read the promotion records: the environment sequence, whose load test judges the
candidate, and whether the serving image really carries this candidate's bundle.

- `promoted-from`: a candidate (identified by the sha256 of its bundle metadata) enters staging
  only if it is deployed in dev, and prod only if it is deployed in staging, according to the
  store's history and records (a rolled-back promotion no longer counts). Not a convention: the
  records are the evidence.
- `loadtest-source`: an environment with `loadtest_from` (prod: staging) is judged on the load
  test that environment's smoke check ran against its live deployment of this candidate (stored
  beside its record), never on another one; without --loadtest it is taken from the store.
- `image-carries-bundle`: the serving image's label `eu.ml-platform.bundle.metadata-sha256`
  (read back from the built image into the build record) equals the candidate's bundle hash.
"""

from __future__ import annotations

from typing import Any

from promotion.config import EnvironmentConfig
from promotion.gates import GateResult
from promotion.store import ModelStore

BUNDLE_LABEL = "eu.ml-platform.bundle.metadata-sha256"


def _deployed_record(store: ModelStore, environment: str, bundle_sha: str | None) -> dict[str, Any] | None:
    """The record of the live-or-earlier deployed promotion of this bundle in `environment`."""
    if not bundle_sha:
        return None
    for entry in reversed(store.deployed(environment)):
        record = store.read_record(entry.record_id)
        if record["lineage"].get("bundle_metadata_sha256") == bundle_sha and record.get("deployable"):
            return record
    return None


def promoted_from(store: ModelStore, env: EnvironmentConfig, bundle_sha: str | None) -> GateResult:
    name = "promoted-from"
    if env.promote_from is None:
        return GateResult(name, "not_applicable", None, None, f"{env.name} is the first environment")
    threshold = f"deployed in {env.promote_from} (promotion records)"
    record = _deployed_record(store, env.promote_from, bundle_sha)
    if record is None:
        return GateResult(
            name,
            "fail",
            None,
            threshold,
            f"this candidate (bundle {str(bundle_sha)[:12]}) was never deployed to {env.promote_from}: "
            f"promote it to {env.promote_from} first; {env.name} takes candidates only from there",
        )
    return GateResult(
        name,
        "pass",
        record["record_id"],
        threshold,
        f"deployed in {env.promote_from} by {record['record_id']}",
    )


def loadtest_source(
    store: ModelStore, env: EnvironmentConfig, bundle_sha: str | None, loadtest: Any
) -> GateResult:
    name = "loadtest-source"
    source = env.loadtest_from or env.name
    declared = (loadtest.data or {}).get("environment") if loadtest else None
    if source == env.name:
        if declared not in (None, env.name):
            return GateResult(
                name, "fail", declared, env.name, f"the load test ran against {declared}, not {env.name}"
            )
        return GateResult(name, "pass", declared, env.name, f"{env.name} is judged on its own load test")
    record = _deployed_record(store, source, bundle_sha)
    expected = (record.get("deployment") or {}).get("loadtest_sha256") if record else None
    got = loadtest.sha256 if loadtest else None
    if record and expected and got == expected:
        return GateResult(
            name, "pass", got, expected, f"the load test of {source}'s promotion {record['record_id']}"
        )
    if record is None:
        why = (
            f"this candidate (bundle {str(bundle_sha)[:12]}) has no deployed promotion in {source}, so no load test "
            f"of {source}'s to judge it on: promote it to {source} first"
        )
    elif not expected:
        # A record from before live load tests were stored (an older promotion), or a smoke command that wrote none:
        # "sha256 None" read as if the user had passed the wrong file.
        why = (
            f"{source}'s promotion {record['record_id']} recorded no live load test (written before promotion "
            f"stored one, or its smoke command wrote none to $PROMOTION_LOADTEST_OUT): promote this candidate to "
            f"{source} again with --post-deploy-loadtest, then to {env.name}"
        )
    else:
        why = (
            f"pass the load test file that {source}'s promotion {record['record_id']} recorded (sha256 "
            f"{expected[:12]}), not another one"
        )
    return GateResult(name, "fail", got, expected, f"{env.name} is judged on {source}'s own load test: {why}")


def recorded_loadtest(store: ModelStore, source: str, evidence: Any, name: str) -> Any:
    """The load test `source`'s deployment of this candidate ran against its live endpoint, as a
    Document (None when there is none: the loadtest gates then fail and say so)."""
    from promotion.evidence import Document, sha256

    bundle_sha = evidence.bundle_metadata.sha256 if evidence.bundle_metadata else None
    record = _deployed_record(store, source, bundle_sha)
    raw = store.read_attachment(record["record_id"], name) if record else None
    if record is None or raw is None:
        return None
    import json

    uri = f"{store.record_uri(record['record_id'])} ({name})"
    return Document(uri=uri, data=json.loads(raw), sha256=sha256(raw))


def image_carries_bundle(
    build: dict[str, Any] | None, bundle_sha: str | None, *, local_run: bool
) -> GateResult:
    name = "image-carries-bundle"
    image = ((build or {}).get("images") or {}).get("serving") or {}
    label = (image.get("labels") or {}).get(BUNDLE_LABEL)
    if not image and local_run:
        return GateResult(name, "not_applicable", None, bundle_sha, "local run: no serving image was built")
    if bundle_sha and label == bundle_sha:
        return GateResult(name, "pass", label, bundle_sha, "the serving image was built from this bundle")
    return GateResult(
        name,
        "fail",
        label,
        bundle_sha,
        "the serving image's label eu.ml-platform.bundle.metadata-sha256 does not name this bundle: "
        "build it with `make images IMAGES_ARGS='--bundle CANDIDATE/export'`",
    )
