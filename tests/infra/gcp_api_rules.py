"""Limits Google states in words rather than in a schema: each rule reads its numbers (or its regular
expression) from the member's description in the discovery document, and raises if the description no
longer says so, so a changed API fails here instead of being checked against a stale limit. Where the
description only links to documentation, the rule cites that page.

Keyed by (discovery document, member label): `Schema.property` for body members (nested inline objects
as `Schema.a.b`, list elements `[]`, map keys `{key}`, map values `{}`), `method.id?name` for parameters."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import regex

from infra.config import limits

Rule = Callable[[Any, str], str | None]


def said(description: str, pattern: str) -> re.Match[str]:
    found = re.search(pattern, description, re.S)
    if not found:
        raise RuntimeError(f"the discovery document no longer says {pattern!r}: update gcp_api_rules.py")
    return found


def _seconds(value: str) -> float:
    return float(value.rstrip("s"))


def _last(value: str) -> str:
    """The id at the end of a resource name (`projects/p/topics/<id>`)."""
    return value.rsplit("/", 1)[-1]


def _regex_rule(pattern: str, *, last: bool = False) -> Rule:
    """The description gives a regular expression (in backquotes) the whole id must match."""

    def rule(value: Any, doc: str) -> str | None:
        regex = said(doc, pattern).group(1)
        v = _last(value) if last else value
        return None if re.fullmatch(regex, v) else f"{v!r} does not match `{regex}` (the description's rule)"

    return rule


def _account_id(value: Any, doc: str) -> str | None:
    found = said(doc, r"must be (\d+)-(\d+) characters long, and match the regular expression `([^`]+)`")
    lo, hi, regex = int(found[1]), int(found[2]), found[3]
    ok = lo <= len(value) <= hi and re.fullmatch(regex, value)
    return (
        None if ok else f"length {len(value)}; must be {lo}-{hi} characters matching `{regex}` (description)"
    )


def _pubsub_id(value: Any, doc: str) -> str | None:
    """Topic and subscription ids: the description lists the characters, the length and the `goog` prefix."""
    found = said(
        doc, r"must start with a letter.*?between (\d+) and (\d+) characters.*?must not start with `\"goog\"`"
    )
    said(doc, r"letters \(`\[A-Za-z\]`\), numbers \(`\[0-9\]`\), dashes \(`-`\), underscores \(`_`\), "
              r"periods \(`\.`\), tildes \(`~`\), plus \(`\+`\) or percent signs \(`%`\)")  # fmt: skip
    lo, hi, v = int(found[1]), int(found[2]), _last(value)
    if not (re.fullmatch(r"[A-Za-z][A-Za-z0-9\-_.~+%]*", v) and lo <= len(v) <= hi) or v.startswith("goog"):
        return (
            f"{v!r}: must start with a letter, use [A-Za-z0-9-_.~+%], be {lo}-{hi} long, not start with goog"
        )
    return None


def _limited_id(value: Any, doc: str) -> str | None:
    """Log bucket ids and sink names: `limited to N characters`, letters, digits, `_ - .`, alphanumeric first."""
    hi = int(said(doc, r"limited to (\d+) characters")[1])
    said(doc, r"(letters, digits, underscores, hyphens, and periods|alphanumeric characters, underscores, "
              r"hyphens, periods)")  # fmt: skip
    ok = len(value) <= hi and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value)
    return None if ok else f"length {len(value)}: at most {hi} of letters, digits, _ - . (alphanumeric first)"


def _max_chars(pattern: str, *, utf8: bool = False) -> Rule:
    def rule(value: Any, doc: str) -> str | None:
        hi = int(said(doc, pattern)[1])
        size = len(value.encode()) if utf8 else len(value)
        return (
            None if size <= hi else f"{size} {'bytes' if utf8 else 'characters'}; at most {hi} (description)"
        )

    return rule


def _cluster_name(value: Any, doc: str) -> str | None:
    hi = int(said(doc, r"can be up to (\d+) characters")[1])
    said(
        doc,
        r"Lowercase letters, numbers, and hyphens only.*Must start with a letter.*Must end with a number or a letter",
    )
    ok = len(value) <= hi and re.fullmatch(r"[a-z]([a-z0-9-]*[a-z0-9])?", value)
    return None if ok else f"length {len(value)}: up to {hi} lowercase letters, digits, hyphens (description)"


def _listed(pattern: str) -> Rule:
    """The description lists the accepted values (`Values include A, B, and C`)."""

    def rule(value: Any, doc: str) -> str | None:
        parts = re.split(r",\s*(?:and\s+)?|\s+and\s+", said(doc, pattern)[1])
        listed = [p.strip(" '\"") for p in parts if p.strip(" '\"")]
        return None if value in listed else f"not one of {listed} (the description's values)"

    return rule


def _seconds_between(pattern: str, lo_unit: float, hi_unit: float, *, duration: bool) -> Rule:
    """`pattern` captures (lowest, highest) in the description, in the given units of seconds."""

    def rule(value: Any, doc: str) -> str | None:
        found = said(doc, pattern)
        lo, hi = float(found["lo"].replace(",", "")) * lo_unit, float(found["hi"].replace(",", "")) * hi_unit
        seconds = _seconds(value) if duration else float(value)
        if duration is False and seconds == 0:
            return None  # 0: "a default value of 10 seconds is used"
        return None if lo <= seconds <= hi else f"{seconds:g} s is outside {lo:g}..{hi:g} s (description)"

    return rule


def _retention_days(value: Any, doc: str) -> str | None:
    lo = int(said(doc, r"minimum retention period is (\d+) day")[1])
    hi = limits.GCP_LOG_BUCKET_RETENTION.maximum or 0
    return (
        None if lo <= value <= hi else f"outside {lo}..{hi} days ({limits.GCP_LOG_BUCKET_RETENTION.source})"
    )


# cloud.google.com/kms/docs/destroy-restore#customize-scheduled-destruction: "between 24 hours and 120 days"
KMS_DESTROY_SCHEDULED = (24 * 3600, 120 * 86400)
# cloud.google.com/storage/docs/buckets#naming: 3-63 characters (up to 222 with dots, each part <= 63),
# lowercase letters, digits, `-`, `_`, `.`; a letter or digit first and last; no `goog` prefix, no `google`.
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]")
# cloud.google.com/artifact-registry/docs/repositories/create-repos: lowercase letters, digits and hyphens,
# a letter first, a letter or digit last, at most 63 characters.
REPOSITORY_ID = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")


def _bucket_name(value: Any, _doc: str) -> str | None:
    ok = BUCKET_NAME.fullmatch(value) and not value.startswith("goog") and "google" not in value
    return (
        None
        if ok
        else "not a bucket name (3-63 of a-z 0-9 - _ ., no goog prefix: storage/docs/buckets#naming)"
    )


def _repository_id(value: Any, _doc: str) -> str | None:
    ok = REPOSITORY_ID.fullmatch(value)
    return None if ok else "not a repository id (<= 63 of a-z 0-9 -, a letter first: artifact-registry docs)"


def _destroy_scheduled(value: Any, _doc: str) -> str | None:
    lo, hi = KMS_DESTROY_SCHEDULED
    return None if lo <= _seconds(value) <= hi else f"outside {lo}..{hi} s (kms/docs/destroy-restore)"


def _max_items(pattern: str) -> Rule:
    def rule(value: Any, doc: str) -> str | None:
        hi = int(said(doc, pattern)[1])
        return None if len(value) <= hi else f"{len(value)} items; at most {hi} (description)"

    return rule


RULES: dict[tuple[str, str], Rule] = {
    ("iam.v1", "CreateServiceAccountRequest.accountId"): _account_id,
    ("iam.v1", "ServiceAccount.displayName"): _max_chars(r"maximum length is (\d+) UTF-8 bytes", utf8=True),
    ("cloudkms.v1", "cloudkms.projects.locations.keyRings.create?keyRingId"): _regex_rule(
        r"match the regular expression `([^`]+)`"
    ),
    ("cloudkms.v1", "cloudkms.projects.locations.keyRings.cryptoKeys.create?cryptoKeyId"): _regex_rule(
        r"match the regular expression `([^`]+)`"
    ),
    ("cloudkms.v1", "CryptoKey.rotationPeriod"): _seconds_between(
        r"at least (?P<lo>[\d,]+) hours and at most (?P<hi>[\d,]+) hours", 3600, 3600, duration=True
    ),
    ("cloudkms.v1", "CryptoKey.destroyScheduledDuration"): _destroy_scheduled,
    ("pubsub.v1", "pubsub.projects.topics.create?name"): _pubsub_id,
    ("pubsub.v1", "pubsub.projects.subscriptions.create?name"): _pubsub_id,
    ("pubsub.v1", "Subscription.ackDeadlineSeconds"): _seconds_between(
        r"minimum custom deadline you can specify is (?P<lo>\d+) seconds\. The maximum custom deadline you "
        r"can specify is (?P<hi>\d+) seconds",
        1,
        1,
        duration=False,
    ),  # fmt: skip
    ("pubsub.v1", "Subscription.messageRetentionDuration"): _seconds_between(
        r"Cannot be more than (?P<hi>\d+) days or less than (?P<lo>\d+) minutes", 60, 86400, duration=True
    ),
    ("billingbudgets.v1", "GoogleCloudBillingBudgetsV1Budget.displayName"): _max_chars(
        r"less than or equal to (\d+) characters"
    ),
    ("billingbudgets.v1", "GoogleCloudBillingBudgetsV1NotificationsRule.schemaVersion"): _listed(
        r"Only \"([^\"]+)\" is accepted"
    ),
    ("logging.v2", "logging.projects.locations.buckets.create?bucketId"): _limited_id,
    ("logging.v2", "LogSink.name"): _limited_id,
    ("logging.v2", "LogBucket.retentionDays"): _retention_days,
    ("monitoring.v3", "NotificationChannel.displayName"): _max_chars(r"limited to (\d+) Unicode characters"),
    ("monitoring.v3", "AlertPolicy.displayName"): _max_chars(r"limited to (\d+) Unicode characters"),
    ("container.v1", "Cluster.name"): _cluster_name,
    ("storage.v1", "Bucket.name"): _bucket_name,
    ("storage.v1", "Bucket.storageClass"): _listed(r"Values include ([A-Za-z_, ]+)\."),
    ("storage.v1", "Bucket.iamConfiguration.publicAccessPrevention"): _listed(
        r"Currently, ('\w+' and '\w+') are supported"
    ),
    ("storage.v1", "Bucket.lifecycle.rule[].action.type"): _listed(
        r"Currently, only ([A-Za-z, ]+) are supported"
    ),
    (
        "artifactregistry.v1",
        "artifactregistry.projects.locations.repositories.create?repositoryId",
    ): _repository_id,
    ("billingbudgets.v1", "GoogleCloudBillingBudgetsV1NotificationsRule.monitoringNotificationChannels"): (
        _max_items(r"A maximum of (\d+) email notifications are allowed")
    ),
}


# GCP labels (cloud.google.com/resource-manager/docs/labels-overview#requirements, which the members'
# descriptions link to or repeat: Artifact Registry's Repository.labels, Monitoring's userLabels): at most
# 64 per resource; keys 1-63 characters, values 0-63, of lowercase letters, digits, `_` and `-` (international
# characters allowed); a key starts with a lowercase letter (or an international character).
MAX_LABELS = 64
LABEL_KEY = regex.compile(r"[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]{0,62}")
LABEL_VALUE = regex.compile(r"[\p{Ll}\p{Lo}\p{N}_-]{0,63}")
LABEL_MEMBERS: dict[str, tuple[str, ...]] = {
    "storage.v1": ("Bucket.labels",),
    "pubsub.v1": ("Topic.labels", "Subscription.labels"),
    "cloudkms.v1": ("CryptoKey.labels",),
    "artifactregistry.v1": ("Repository.labels",),
    "container.v1": ("Cluster.resourceLabels", "NodeConfig.resourceLabels"),
    "monitoring.v3": ("NotificationChannel.userLabels", "AlertPolicy.userLabels"),
}


# pulumi-gcp 8+ adds `goog-pulumi-provisioned` to every labelled resource (its 8.0 migration guide, "Default
# label"; the stack's provider does not set addPulumiAttributionLabel false): one label more than the plan sends.
PROVIDER_LABELS = limits.GCP_PROVIDER_LABELS


def label_problems(labels: dict[str, Any]) -> list[str | None]:
    out: list[str | None] = []
    if len(labels) + PROVIDER_LABELS > MAX_LABELS:
        out.append(
            f"{len(labels) + PROVIDER_LABELS} labels with the provider's goog-pulumi-provisioned; at most "
            f"{MAX_LABELS} (resource-manager/docs/labels-overview)"
        )
    for k, v in labels.items():
        if not LABEL_KEY.fullmatch(k):
            out.append(
                f"label key {k!r}: 1-63 lowercase letters, digits, _ or -, a letter first (labels-overview)"
            )
        if not isinstance(v, str) or not LABEL_VALUE.fullmatch(v):
            out.append(f"label {k!r} value {v!r}: 0-63 lowercase letters, digits, _ or - (labels-overview)")
    return out
