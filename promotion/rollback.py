"""Rollback: point an environment back at its previously promoted version, with a record of why."""

from __future__ import annotations

import dataclasses
from typing import Any

from promotion import drift_reference, interrupted, lock
from promotion.card import render_markdown
from promotion.errors import PromotionError, RegistryError
from promotion.outcome import Outcome, deploy_summary
from promotion.record import check_restored, rollback_record
from promotion.registry import Registry, without_password
from promotion.store import Deployed, ModelStore


def rollback(
    environment: str,
    *,
    store: ModelStore,
    registry: Registry,
    reason: str,
    requested_by: str | None = None,
    needs_image: bool = False,
    drift_reference_to: str | None = None,
) -> Outcome:
    """Point `environment`'s alias (and the deploy's serving image) back to the previously promoted version,
    holding the environment's lock (a rollback racing a promotion would pop the wrong entry). `needs_image`: the
    caller writes the restored serving image somewhere (--stack-config), so a version without one is refused.
    `drift_reference_to`: also write the restored version's drift reference there, once rolled back."""
    with lock.held(store.root, store.model, environment, operation="rollback", requested_by=requested_by):
        return _rollback(
            environment,
            store=store,
            registry=registry,
            reason=reason,
            requested_by=requested_by,
            needs_image=needs_image,
            drift_reference_to=drift_reference_to,
        )


def _rollback(
    environment: str,
    *,
    store: ModelStore,
    registry: Registry,
    reason: str,
    requested_by: str | None,
    needs_image: bool,
    drift_reference_to: str | None,
) -> Outcome:
    stack = store.deployed(environment)
    if len(stack) < 2:
        raise PromotionError(
            f"{environment} has {len(stack)} promoted version(s) in {store.history_uri(environment)}: "
            "nothing to roll back to"
        )
    current, previous = stack[-1], stack[-2]
    if needs_image and not previous.serving_image:
        # Refused after the rollback, this was exit 2 with the record, alias and history already moved: a retry
        # rolled back one version further.
        raise PromotionError(
            f"--stack-config: {environment} would go back to version {previous.version} (record "
            f"{previous.record_id}), a local run with no serving image, so there is no digest to write into the stack "
            "config. Nothing was changed: roll back without --stack-config (the stack keeps its image), or promote "
            "a built image to it"
        )
    if not registry.exists():
        used = (store.read_record(current.record_id).get("model") or {}).get("registry_uri")
        if not used:  # a record from before registry_uri was kept
            fix = "give the --registry-uri (or MLFLOW_REGISTRY_URI) its promotions used"
        elif without_password(used) == registry.shown_uri:  # the very registry: its file or database is gone
            fix = f"that is the registry {environment}'s promotions used: restore its file or database from a backup"
        else:
            fix = (
                f"{environment}'s promotions registered their versions in {used}: give --registry-uri {used}"
            )
        raise RegistryError(
            f"model registry {registry.shown_uri} does not exist yet: no version was ever registered there, so "
            f"{environment} cannot be rolled back in it. Nothing was changed; {fix}"
        )
    live = registry.alias_version(store.model, environment)
    if live is not None and live != current.version:
        raise RegistryError(
            f"the registry's {environment} alias is version {live} but the promotion history says {current.version}: "
            "someone moved the alias by hand; fix it with `MlflowClient().set_registered_model_alias` first"
        )
    restored = store.read_record(previous.record_id)
    # Checked before anything is written: a rollback record for a version the registry cannot point at
    # would claim a rollback that never happened (and each retry would add another).
    if not registry.has_version(store.model, previous.version):
        raise RegistryError(
            f"cannot roll {environment} back to version {previous.version} of {store.model}: it no longer exists in "
            f"the registry {registry.shown_uri} (deleted). Nothing was changed. To serve that model again, promote its "
            f"candidate anew (`python -m promotion promote --env {environment} --candidate "
            f"{(restored['lineage'].get('inputs') or {}).get('candidate')} ...`), which registers a new version"
        )
    record = rollback_record(
        restored=restored,
        restored_version=previous.version,
        from_version=current.version,
        from_record=current.record_id,
        reason=reason,
        requested_by=requested_by,
        registry_uri=registry.shown_uri,
    )
    # A record from before the reference was kept beside its record (drift_reference.ATTACHMENT) names its own,
    # since replaced: a rollback record names none (what this rollback wrote is beside it).
    record.pop("drift_reference", None)
    prepared, not_built = None, None
    if drift_reference_to:
        # Built before anything is written, but a rollback is not refused for it: the model goes back first.
        try:
            prepared = drift_reference.for_record(restored, drift_reference_to)
        except PromotionError as exc:
            not_built = str(exc)
    check_restored(record, store.record_uri(previous.record_id), environment, previous.version)
    done = f"{environment} was rolled back to version {previous.version} (record {record['record_id']})"
    outcome = None
    try:
        # The reference too: a Ctrl-C or SIGTERM held until the alias moved used to end the rollback before it.
        with interrupted.writes_held():
            outcome = _record_rollback(record, environment, previous, current, store=store, registry=registry)
            if prepared is not None:
                outcome = drift_reference.written_after(
                    outcome, prepared, done=done, environment=environment, store=store, by="rollback"
                )
            elif not_built is not None:
                why = drift_reference.not_written(
                    done, str(drift_reference_to), not_built, environment, store
                )
                outcome = dataclasses.replace(outcome, unfinished=why)
    except interrupted.STOPPED:
        drift_reference.told_when_stopped(outcome)
        raise
    return outcome


def _record_rollback(
    record: dict[str, Any],
    environment: str,
    previous: Deployed,
    current: Deployed,
    *,
    store: ModelStore,
    registry: Registry,
) -> Outcome:
    uri = store.write_record(record, render_markdown(record))
    registry.set_alias(store.model, environment, previous.version)
    store.append_event(
        environment,
        {
            "action": "rollback",
            "version": previous.version,
            "from_version": current.version,
            "record_id": record["record_id"],
            "serving_image": previous.serving_image,
            "at": record["created"],
        },
    )
    return Outcome(record, uri, deploy_summary(record))
