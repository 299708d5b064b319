"""Key hygiene: customer-managed keys rotate, cannot be destroyed at once, and grant nothing to '*'."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .core import (
    Context,
    Resource,
    Rule,
    as_list,
    as_number,
    get,
    is_unknown,
    parse_json_document,
    types,
    undetermined,
)

MAX_ROTATION_DAYS = 90
# AWS allows 7-30 days; 30 leaves time to notice a scheduled deletion before prod data is lost.
# Non-prod stacks are torn down and rebuilt, so they may use the 7-day minimum (infra does).
MIN_DELETION_WINDOW_DAYS = 30
MIN_DELETION_WINDOW_DAYS_NON_PROD = 7

_DURATION = re.compile(r"^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?$")


def iso_days(value: str) -> float | None:
    """'P90D' -> 90, 'P3M' -> 90, '7776000s' (GCP) -> 90."""
    if value.endswith("s") and value[:-1].replace(".", "", 1).isdigit():
        return float(value[:-1]) / 86400
    m = _DURATION.match(value.split("T", 1)[0])
    if not m:
        return None
    y, mo, w, d = (int(g) if g else 0 for g in m.groups())
    return y * 365 + mo * 30 + w * 7 + d


KEY_TYPES = types(
    "aws:kms/key:Key",
    "gcp:kms/cryptoKey:CryptoKey",
    "azure-native:keyvault:Key",
    "azure-native:keyvault:Vault",
)


def check_rotation(r: Resource, ctx: Context) -> Iterator[str]:
    i = r.inputs
    limit = float(ctx.setting("maxRotationDays", MAX_ROTATION_DAYS))
    if r.type == "aws:kms/key:Key":
        if is_unknown(get(i, "enableKeyRotation")) or is_unknown(get(i, "rotationPeriodInDays")):
            yield undetermined("enableKeyRotation or rotationPeriodInDays is unknown at preview")
            return
        if get(i, "enableKeyRotation") is not True:
            yield "KMS key rotation is off: set enableKeyRotation=True."
            return
        days = as_number(get(i, "rotationPeriodInDays"))
        if days is None:
            yield f"KMS key rotates every 365 days (the default): set rotationPeriodInDays<={limit:g}."
        elif days is not None and days > limit:
            yield f"KMS key rotationPeriodInDays={days:g} exceeds {limit:g}."
    elif r.type == "gcp:kms/cryptoKey:CryptoKey":
        period = get(i, "rotationPeriod")
        if is_unknown(period):
            yield undetermined("rotationPeriod is unknown at preview")
            return
        days = iso_days(period) if isinstance(period, str) else None
        if days is None or days > limit:
            yield f"Cloud KMS key rotationPeriod={period!r}: set it to at most '{int(limit * 86400)}s' ({limit:g} days)."
    elif r.type == "azure-native:keyvault:Key":
        raw = get(i, "properties.rotationPolicy.lifetimeActions")
        actions = as_list(raw)
        rotate = [a for a in actions if str(get(a, "action.type")).lower() == "rotate"]
        after = [get(a, "trigger.timeAfterCreate") for a in rotate]
        ok = any(isinstance(t, str) and not is_unknown(t) and (iso_days(t) or 1e9) <= limit for t in after)
        # A known action that rotates in time decides; otherwise an unknown one might, or might not.
        unknown = is_unknown(raw) or any(
            is_unknown(get(a, "action.type")) or is_unknown(get(a, "trigger.timeAfterCreate"))
            for a in actions
        )
        if not ok and unknown:
            yield undetermined("properties.rotationPolicy.lifetimeActions is unknown at preview")
        elif not ok:
            yield f"Key Vault key has no rotation policy rotating within {limit:g} days: add properties.rotationPolicy.lifetimeActions=[{{action: {{type: 'rotate'}}, trigger: {{timeAfterCreate: 'P90D'}}}}]."


def min_deletion_window(ctx: Context) -> float:
    default = (
        MIN_DELETION_WINDOW_DAYS if ctx.environment in (None, "prod") else MIN_DELETION_WINDOW_DAYS_NON_PROD
    )
    return float(ctx.setting("minDeletionWindowDays", default))


def check_deletion_protection(r: Resource, ctx: Context) -> Iterator[str]:
    i = r.inputs
    need = min_deletion_window(ctx)
    if r.type == "aws:kms/key:Key":
        raw = get(i, "deletionWindowInDays")
        days = as_number(raw)
        if is_unknown(raw):
            yield undetermined("deletionWindowInDays is unknown at preview")
        elif days is not None and days < need:
            yield f"KMS key deletionWindowInDays={days:g} in {ctx.environment or 'this stack'}: set it to at least {need:g} so a scheduled deletion can be noticed and cancelled."
    elif r.type == "gcp:kms/cryptoKey:CryptoKey":
        dur = get(i, "destroyScheduledDuration")
        days = iso_days(dur) if isinstance(dur, str) and not is_unknown(dur) else None
        if is_unknown(dur):
            yield undetermined("destroyScheduledDuration is unknown at preview")
        elif days is not None and days < need:
            yield f"Cloud KMS key destroyScheduledDuration={dur!r}: set it to at least '{int(need * 86400)}s' ({need:g} days)."
    elif r.type == "azure-native:keyvault:Vault":
        if is_unknown(get(i, "properties.enablePurgeProtection")):
            yield undetermined("properties.enablePurgeProtection is unknown at preview")
        elif get(i, "properties.enablePurgeProtection") is not True:
            yield "Key Vault purge protection is off: set properties.enablePurgeProtection=True (it cannot be turned off later)."
        if get(i, "properties.enableSoftDelete") is False:
            yield "Key Vault soft delete is off: remove enableSoftDelete=False."


def wildcard_principals(doc: dict[str, Any]) -> list[str]:
    """Allow statements granting to '*' without a Condition (anyone, any account)."""
    found = []
    for n, st in enumerate(as_list(doc.get("Statement"))):
        if not isinstance(st, dict) or st.get("Effect") != "Allow" or st.get("Condition"):
            continue
        principal = st.get("Principal")
        values = (
            [principal]
            if isinstance(principal, str)
            else [v for vs in (principal or {}).values() for v in as_list(vs)]
            if isinstance(principal, dict)
            else []
        )
        if "*" in values:
            found.append(st.get("Sid") or f"Statement[{n}]")
    return found


def check_key_policy(r: Resource, ctx: Context) -> Iterator[str]:
    if is_unknown(get(r.inputs, "policy")):
        yield undetermined("the key policy is unknown at preview")
        return
    doc = parse_json_document(get(r.inputs, "policy"))
    if doc is None:
        return
    for sid in wildcard_principals(doc):
        yield f"Key policy statement {sid} allows Principal '*' without a Condition: name the account root, roles or services instead."


RULES = (
    Rule(
        name="kms-key-rotation",
        description=f"Customer-managed keys rotate automatically at least every {MAX_ROTATION_DAYS} days.",
        kind="resource",
        severity="high",
        enforcement="mandatory",
        remediation="AWS: enable_key_rotation=True, rotation_period_in_days=90. GCP: rotation_period='7776000s'. Azure: a rotation policy with timeAfterCreate 'P90D'.",
        url="https://docs.aws.amazon.com/kms/latest/developerguide/rotate-keys.html",
        validate=check_rotation,
        applies_to=types("aws:kms/key:Key", "gcp:kms/cryptoKey:CryptoKey", "azure-native:keyvault:Key"),
        config_schema={"maxRotationDays": {"type": "number"}},
    ),
    Rule(
        name="kms-key-deletion-protection",
        description="Keys cannot be destroyed at once: a 30-day deletion window in prod (7 elsewhere), purge protection on.",
        kind="resource",
        severity="high",
        enforcement="mandatory",
        remediation="AWS: deletion_window_in_days=30. GCP: destroy_scheduled_duration >= '2592000s'. Azure: enable_purge_protection=True on the vault.",
        url="https://learn.microsoft.com/en-us/azure/key-vault/general/soft-delete-overview",
        validate=check_deletion_protection,
        applies_to=types("aws:kms/key:Key", "gcp:kms/cryptoKey:CryptoKey", "azure-native:keyvault:Vault"),
        config_schema={"minDeletionWindowDays": {"type": "number"}, "environment": {"type": "string"}},
    ),
    Rule(
        name="kms-key-policy-no-wildcard-principal",
        description="Key policies grant no permission to the wildcard principal '*'.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Replace Principal '*' with the account root (arn:aws:iam::<account>:root) and the roles that use the key, or add a Condition such as aws:PrincipalAccount.",
        url="https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-overview.html",
        validate=check_key_policy,
        applies_to=types("aws:kms/key:Key", "aws:kms/keyPolicy:KeyPolicy"),
    ),
)
