"""Two of the three operations: evaluate (dry run) and promote (record + registry + alias); rollback is in
promotion/rollback.py.

`python -m promotion` is a thin CLI over these functions; the demo and the GitHub
workflows call the CLI.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from promotion import classes, drift_reference, gates, interrupted, lock, rescore, sequence
from promotion.card import render_markdown
from promotion.config import PromotionConfig
from promotion.deploy import Deployer, DeployError
from promotion.errors import PromotionError, RegistryError
from promotion.evidence import Evidence
from promotion.outcome import Outcome, deploy_summary
from promotion.record import build_record, validate_record
from promotion.registry import Registry
from promotion.store import ModelStore

# The load test the smoke check ran against the live endpoint, stored beside the record.
LIVE_LOADTEST = "post-deploy-loadtest.json"


def run_gates(
    evidence: Evidence,
    config: PromotionConfig,
    environment: str,
    *,
    champion: dict[str, Any] | None,
    local_run: bool,
    requested_by: str | None,
    store: ModelStore,
) -> list[gates.GateResult]:
    env = config.environment(environment)
    g = config.gates
    metrics = evidence.metrics.data
    metadata = evidence.bundle_metadata.data if evidence.bundle_metadata else None
    loadtest = evidence.loadtest.data if evidence.loadtest else None
    build = evidence.build_record.data if evidence.build_record else None
    bundle_sha = evidence.bundle_metadata.sha256 if evidence.bundle_metadata else None
    # The champion's numbers on the candidate's own test rows (rescore.py): recorded when their data are the same.
    fix = rescore.fix_command(evidence.candidate_uri, env.name, store.root, store.model)
    best = rescore.versus(metrics, champion, fix=fix)
    versus = classes.compared(evidence.manifest, champion)  # the champion's and the candidate's class names
    return [
        sequence.promoted_from(store, env, bundle_sha),
        sequence.loadtest_source(store, env, bundle_sha, evidence.loadtest),
        sequence.image_carries_bundle(build, bundle_sha, local_run=local_run),
        gates.beats_baseline(metrics, g),
        gates.not_worse_than_champion(
            metrics,
            best.metrics,
            g,
            environment=env.name,
            basis=best.basis,
            incomparable=best.incomparable,
            **versus,
        ),
        gates.onnx_parity(metadata, g),
        gates.int8_accuracy(metadata, g),
        gates.same_dataset(metrics, metadata, build),
        gates.latency_slo(loadtest, env),
        gates.loadtest_errors(loadtest, g),
        gates.policy_clean(
            evidence.policy_report.data if evidence.policy_report else None,
            env,
            evidence.policy_plan_sha256,
            plan_note=evidence.policy_plan_note,
            waivers_now=evidence.policy_waivers_now,
        ),
        gates.images_pinned(build, env, local_run=local_run),
        gates.approval(evidence.approval.data if evidence.approval else None, env, requested_by=requested_by),
    ]


def evaluate(
    evidence: Evidence,
    config: PromotionConfig,
    environment: str,
    *,
    store: ModelStore,
    action: str = "evaluate",
    registry_uri: str | None = None,
    local_run: bool = False,
    requested_by: str | None = None,
) -> dict[str, Any]:
    """Judge the candidate against `environment`'s gates; returns the (unsaved) record."""
    env = config.environment(environment)
    if local_run and not env.allow_local_run:
        raise PromotionError(
            f"--local-run is not allowed for {environment}: it deploys pinned images only (allow_local_run = false)"
        )
    if env.loadtest_from and evidence.loadtest is None:
        evidence = dataclasses.replace(
            evidence, loadtest=sequence.recorded_loadtest(store, env.loadtest_from, evidence, LIVE_LOADTEST)
        )
    current = store.champion(env.name)
    results = run_gates(
        evidence,
        config,
        env.name,
        champion=current[1] if current else None,
        local_run=local_run,
        requested_by=requested_by,
        store=store,
    )
    decision, reasons = gates.decide(results)
    record = build_record(
        action=action,
        evidence=evidence,
        env=env,
        gates_cfg=config.gates,
        results=results,
        decision=decision,
        reasons=reasons,
        model_name=store.model,
        registry_uri=registry_uri,
        champion=(current[0].version, current[0].record_id) if current else None,
        requested_by=requested_by,
        local_run=local_run,
    )
    validate_record(record)
    return record


def promote(
    evidence: Evidence,
    config: PromotionConfig,
    environment: str,
    *,
    store: ModelStore,
    registry: Registry,
    deployer: Deployer | None = None,
    local_run: bool = False,
    requested_by: str | None = None,
    drift_reference_to: str | None = None,
) -> Outcome:
    """Gates (approval included) -> deploy -> post-deploy smoke -> register + alias + history, holding the
    environment's lock (promotion/lock.py) from the champion's read to the history's write; then, when
    `drift_reference_to` is given, the promoted run's drift reference is written there (drift_reference.py)."""
    with lock.held(
        store.root,
        store.model,
        config.environment(environment).name,
        operation="promote",
        requested_by=requested_by,
    ):
        return _promote(
            evidence,
            config,
            environment,
            store=store,
            registry=registry,
            deployer=deployer,
            local_run=local_run,
            requested_by=requested_by,
            drift_reference_to=drift_reference_to,
        )


def _promote(
    evidence: Evidence,
    config: PromotionConfig,
    environment: str,
    *,
    store: ModelStore,
    registry: Registry,
    deployer: Deployer | None,
    local_run: bool,
    requested_by: str | None,
    drift_reference_to: str | None,
) -> Outcome:
    """Gates (approval included) -> deploy -> post-deploy smoke -> register + alias + history.

    The record is always written. A deployable candidate needs a `deployer`: the alias never
    moves before the live endpoint passed its smoke check. A failed deploy or smoke check rolls
    the stack back to the image it served before and leaves the alias where it was; Ctrl-C or SIGTERM meanwhile
    leaves a `deploy_interrupted` record (interrupted.py) and goes on ending the promotion. A local run
    (not deployable: no pushed image) only moves the registry alias.
    """
    record = evaluate(
        evidence,
        config,
        environment,
        store=store,
        action="promote",
        registry_uri=registry.shown_uri,
        local_run=local_run,
        requested_by=requested_by,
    )
    if record["decision"] == "promote" and record["deployable"] and deployer is None:
        raise PromotionError(
            f"{environment}: a deployable promotion needs the deploy and smoke steps "
            "(--deploy-command and --smoke-command): the alias moves only after a successful deploy"
        )
    prepared = None
    if record["decision"] == "promote" and drift_reference_to:
        # Built before anything changes: a run whose data or bundle cannot be read stops here (exit 2), not after
        # the deploy; written only once the promotion is done (_published).
        prepared = drift_reference.prepare(
            drift_reference_to, candidate=evidence.candidate_uri, bundle=evidence.bundle_uri
        )
    if record["decision"] == "promote":
        # The version is registered (no alias yet) before anything is deployed: a registry that does not answer
        # stops the promotion (RegistryError, exit 2) while nothing live has changed, never after `up`.
        version = registry.register(
            store.model,
            source=evidence.bundle_uri,
            tags={
                "record_id": record["record_id"],
                "dataset_manifest_sha256": str(record["lineage"]["dataset_manifest_sha256"]),
                "code_revision": record["lineage"]["code_revision"],
                "serving_image": str(record["lineage"]["serving_image"]),
                **{f"test_{k}": str(v) for k, v in (record["lineage"]["metrics"]["test"] or {}).items()},
            },
            description=f"promoted to {environment} by record {record['record_id']}",
        )
        record["model"].update({"version": version, "alias": environment})
        validate_record(record)
    if record["decision"] == "promote" and record["deployable"] and deployer is not None:
        image = str(record["lineage"]["serving_image"])
        current = store.champion(environment)
        previous = current[0].serving_image if current else None
        step = interrupted.Step()
        try:
            live_loadtest = _deploy_half(record, image, previous, deployer=deployer, step=step)
        except interrupted.STOPPED as stop:
            # The command's group is stopped already (deploy.run_group), and what the stack runs now is unknown: the
            # record says so, bounded in time; the alias and the history stay (the candidate was never confirmed).
            interrupted.keep(store, record, image=image, served_before=previous, step=step, stop=stop)
            raise
        try:
            return _recorded(
                record, prepared, environment, store=store, registry=registry, live=live_loadtest
            )
        except RegistryError as exc:
            if prepared is None:
                raise
            rerun = drift_reference.rerun_command(environment, prepared.location, store.root, store.model)
            raise RegistryError(
                f"{exc}. Then write its drift reference, not written either: {rerun}"
            ) from exc
    return _recorded(record, prepared, environment, store=store, registry=registry, live=None)


def _recorded(
    record: dict[str, Any],
    prepared: drift_reference.Prepared | None,
    environment: str,
    *,
    store: ModelStore,
    registry: Registry,
    live: bytes | None,
) -> Outcome:
    """Record, history and alias, then the drift reference (never for a refused or failed promotion, which leaves
    the previous one), all under `writes_held`: a Ctrl-C or SIGTERM once the promotion stands used to end it before
    the reference was written, with nothing saying so."""
    outcome = None
    try:
        with interrupted.writes_held():
            if live:
                # Judges the next environment (its `loadtest_from`): kept beside the record.
                store.write_attachment(record["record_id"], LIVE_LOADTEST, live)
            outcome = _record_and_move(record, environment, store=store, registry=registry)
            if prepared is not None and record["decision"] == "promote":
                done = f"{environment} was promoted (record {record['record_id']})"
                outcome = drift_reference.written_after(
                    outcome, prepared, done=done, environment=environment, store=store, by="promote"
                )
    except interrupted.STOPPED:
        drift_reference.told_when_stopped(outcome)
        raise
    return outcome


def _record_and_move(
    record: dict[str, Any], environment: str, *, store: ModelStore, registry: Registry
) -> Outcome:
    """The record, then (a promotion) the history and the registry alias, in the order that keeps them agreeing."""
    uri = store.write_record(record, render_markdown(record))
    if record["decision"] != "promote":
        return Outcome(record, uri, None)
    version = record["model"]["version"]
    event = {
        "action": "promote",
        "version": version,
        "record_id": record["record_id"],
        "serving_image": record["lineage"]["serving_image"],
        "at": record["created"],
    }
    if (record.get("deployment") or {}).get("status") != "deployed":
        # Nothing live has changed: the record exists before the alias moves and the history is appended
        # last, so a crash or a registry error in between leaves the old champion everywhere.
        registry.set_alias(store.model, environment, version)
        store.append_event(environment, event)
        return Outcome(record, uri, deploy_summary(record))
    # The new image is live: the history (what a rollback restores from) says so before the registry is
    # asked, so a registry that fails now cannot leave it naming the replaced version as live.
    store.append_event(environment, event)
    try:
        registry.set_alias(store.model, environment, version)
    except RegistryError as exc:
        raise RegistryError(
            f"{environment} runs version {version} (deployed, recorded in {store.history_uri(environment)}) but "
            f"its registry alias did not move: {exc}. Once the registry answers, point it there: "
            f"MlflowClient().set_registered_model_alias({store.model!r}, {environment!r}, {version!r}) "
            "(a rollback refuses until the alias and the history agree)"
        ) from exc
    return Outcome(record, uri, deploy_summary(record))


def _deploy_half(
    record: dict[str, Any],
    image: str,
    previous: str | None,
    *,
    deployer: Deployer,
    step: interrupted.Step,
) -> bytes | None:
    """`up` then the smoke check: the live load test it ran, if any. On their failure, the redeploy of `previous`, and
    the record becomes `deploy_failed`. `step` follows what runs, for the record of an interruption."""
    try:
        step.during = "up"
        deployer.up(image)
        step.during = "smoke"
        live_loadtest = deployer.smoke(image)
        record["deployment"] = {
            "status": "deployed",
            "image": image,
            "loadtest_sha256": hashlib.sha256(live_loadtest).hexdigest() if live_loadtest else None,
        }
        return live_loadtest
    except DeployError as exc:
        step.during, step.deploy_error = "rollback", str(exc)
        try:
            deployer.rollback(previous)
            status, reason = (
                "rolled_back",
                f"deploy failed, rolled back to {previous or 'nothing'}: {exc}",
            )
        except DeployError as again:  # the same outage often fails both: the record keeps both messages
            status = "rollback_failed"
            reason = (
                f"deploy failed: {exc}; the rollback to {previous or 'nothing'} failed too: {again}. The "
                "environment's state is unknown: deploy the previous image by hand (`pulumi up`)"
            )
    record.update(decision="deploy_failed", deployable=False)
    record["reasons"].insert(0, reason)
    # The registered version keeps no alias: the champion is unchanged.
    record["model"]["alias"] = None
    record["deployment"] = {
        "status": status,
        "image": image,
        "restored": previous if status == "rolled_back" else None,
    }
    validate_record(record)
    return None
