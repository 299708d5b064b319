"""The API server's own checks on Jobs and CronJobs, which the OpenAPI schema (kubernetes-validate) lacks.

Ported from kubernetes/kubernetes pkg/apis/batch/validation/validation.go: `validatePodFailurePolicy`,
`validatePodFailurePolicyRule`, `validatePodFailurePolicyRuleOnExitCodes` and the podFailurePolicy checks of
`validateJobSpec`; `ValidateJob` (the Indexed pod hostname), `validateJobSpec` (counts, completion mode, the
template's restartPolicy) and `validateCronJobSpec`/`ValidateCronJobCreate` (name length, schedule, time zone).
The API server answers HTTP 422 for each message returned here (for example
`onExitCodes.values: Invalid value: []int32{0, 75, 69}: must be ordered`).
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator
from typing import Any

from tests.k8s_api.names import dns1123_label

# validation.go constants
MAX_RULES = 20  # maxPodFailurePolicyRules
MAX_EXIT_CODE_VALUES = 255  # maxPodFailurePolicyOnExitCodesValues
MAX_POD_CONDITION_PATTERNS = 20  # maxPodFailurePolicyOnPodConditionsPatterns
ACTIONS = {"FailJob", "FailIndex", "Ignore", "Count"}
OPERATORS = {"In", "NotIn"}
CONDITION_STATUSES = {"True", "False", "Unknown"}


def job_specs(obj: Any) -> Iterator[dict[str, Any]]:
    """Every Job spec in a rendered object, nested anywhere (CronJob jobTemplate, lists of manifests)."""
    if isinstance(obj, list):
        for item in obj:
            yield from job_specs(item)
    elif isinstance(obj, dict):
        if obj.get("kind") == "Job" and isinstance(obj.get("spec"), dict):
            yield obj["spec"]
        elif obj.get("kind") == "CronJob":
            yield obj["spec"]["jobTemplate"]["spec"]
        else:
            for value in obj.values():
                yield from job_specs(value)


def pod_failure_policy_errors(spec: dict[str, Any]) -> list[str]:
    """The API server's messages for this Job spec's podFailurePolicy; empty when it would be accepted."""
    policy = spec.get("podFailurePolicy")
    if policy is None:
        return []
    errors: list[str] = []
    pod = spec["template"]["spec"]
    if pod.get("restartPolicy") != "Never":
        errors.append(
            "template.spec.restartPolicy: only `Never` is supported when podFailurePolicy is specified"
        )
    if spec.get("podReplacementPolicy", "Failed") != "Failed":
        errors.append("podReplacementPolicy: must be Failed when podFailurePolicy is specified")
    containers = {c["name"] for c in pod.get("containers", []) + pod.get("initContainers", [])}
    rules = policy.get("rules", [])
    if len(rules) > MAX_RULES:
        errors.append(f"podFailurePolicy.rules: Too many: {len(rules)}: must have at most {MAX_RULES} items")
    for i, rule in enumerate(rules):
        errors += [f"podFailurePolicy.rules[{i}].{e}" for e in _rule_errors(rule, spec, containers)]
    return errors


def _rule_errors(rule: dict[str, Any], spec: dict[str, Any], containers: set[str]) -> list[str]:
    errors: list[str] = []
    action = rule.get("action")
    if action not in ACTIONS:
        errors.append(f"action: Unsupported value: {action!r}")
    if action == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
        errors.append("action: FailIndex requires backoffLimitPerIndex")
    on_codes, on_conditions = rule.get("onExitCodes"), rule.get("onPodConditions")
    if (on_codes is None) == (on_conditions is None):
        errors.append("specifying one of onExitCodes and onPodConditions is required")
    if on_codes is not None:
        errors += [f"onExitCodes.{e}" for e in _exit_code_errors(on_codes, containers)]
    for j, pattern in enumerate(on_conditions or []):
        if pattern.get("status") not in CONDITION_STATUSES:
            errors.append(f"onPodConditions[{j}].status: Unsupported value: {pattern.get('status')!r}")
        if not pattern.get("type"):
            errors.append(f"onPodConditions[{j}].type: Required value")
    if on_conditions is not None and len(on_conditions) > MAX_POD_CONDITION_PATTERNS:
        errors.append(f"onPodConditions: Too many: must have at most {MAX_POD_CONDITION_PATTERNS} items")
    return errors


def _exit_code_errors(req: dict[str, Any], containers: set[str]) -> list[str]:
    errors: list[str] = []
    name = req.get("containerName")
    if name is not None and name not in containers:
        errors.append(
            f"containerName: Invalid value: {name!r}: must be one of the container or initContainer names"
        )
    operator = req.get("operator")
    if operator not in OPERATORS:
        errors.append(f"operator: Unsupported value: {operator!r}")
    values = req.get("values", [])
    if not values:
        errors.append("values: Invalid value: at least one value is required")
    if len(values) > MAX_EXIT_CODE_VALUES:
        errors.append(f"values: Too many: {len(values)}: must have at most {MAX_EXIT_CODE_VALUES} items")
    seen: set[int] = set()
    for j, value in enumerate(values):
        if operator == "In" and value == 0:
            errors.append(f"values[{j}]: Invalid value: 0: must not be 0 for the In operator")
        if value in seen:
            errors.append(f"values[{j}]: Duplicate value: {value}")
        seen.add(value)
    if any(a > b for a, b in zip(values, values[1:], strict=False)):
        errors.append(f"values: Invalid value: {values}: must be ordered")
    return errors


def job_spec_errors(spec: dict[str, Any], name: str, path: str) -> list[str]:
    """validateJobSpec and ValidateJob's Indexed-hostname rule (the pod spec itself: tests/k8s_api/pod.py)."""
    errors = [f"{path}.{e}" for e in pod_failure_policy_errors(spec)]
    for field in (
        "parallelism",
        "completions",
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    ):
        if spec.get(field) is not None and spec[field] < 0:
            errors.append(f"{path}.{field}: Invalid value: {spec[field]}: must be greater than or equal to 0")
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        errors.append(f"{path}.completionMode: Unsupported value: {mode!r}")
    if mode == "Indexed":
        if spec.get("completions") is None:
            errors.append(f"{path}.completions: Required value: when completion mode is Indexed")
        elif spec["completions"] > 0:
            hostname = f"{name}-{spec['completions'] - 1}"
            if dns1123_label(hostname):
                errors.append(f"metadata.name: Invalid value: {name!r}: will not able to create pod with invalid "
                              f"DNS label: {hostname}")  # fmt: skip
    if spec.get("backoffLimitPerIndex") is not None and mode != "Indexed":
        errors.append(f"{path}.backoffLimitPerIndex: Forbidden: requires indexed completion mode")
    return errors


CRON_JOB_NAME_MAX = 52  # ValidateCronJobCreate: 63 - 11 (each Job is named `<cronjob>-<scheduled time>`)
CONCURRENCY_POLICIES = {"Allow", "Forbid", "Replace"}


def cron_job_errors(obj: dict[str, Any]) -> list[str]:
    spec, name = obj["spec"], obj["metadata"].get("name", "")
    errors: list[str] = []
    if len(name) > CRON_JOB_NAME_MAX:
        errors.append(
            f"metadata.name: Invalid value: {name!r}: must be no more than {CRON_JOB_NAME_MAX} characters"
        )
    schedule = spec.get("schedule", "")
    if "TZ" in schedule:
        errors.append(
            "spec.schedule: Invalid value: cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        )
    elif not _valid_cron(schedule):
        errors.append(f"spec.schedule: Invalid value: {schedule!r}: not a standard cron expression")
    zone = spec.get("timeZone")
    if zone is not None and not _valid_zone(zone):
        errors.append(f"spec.timeZone: Invalid value: {zone!r}: unknown time zone")
    if spec.get("concurrencyPolicy", "Allow") not in CONCURRENCY_POLICIES:
        errors.append(f"spec.concurrencyPolicy: Unsupported value: {spec['concurrencyPolicy']!r}")
    for field in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        if spec.get(field) is not None and spec[field] < 0:
            errors.append(f"spec.{field}: Invalid value: {spec[field]}: must be greater than or equal to 0")
    return errors


def _valid_cron(schedule: str) -> bool:
    """robfig/cron's standard parser (5 fields, or a @descriptor), as validateScheduleFormat uses it."""
    if schedule.startswith("@"):
        return schedule in {
            "@yearly",
            "@annually",
            "@monthly",
            "@weekly",
            "@daily",
            "@midnight",
            "@hourly",
        } or (schedule.startswith("@every "))
    fields = schedule.split()
    atom = r"(\*|\?|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?"
    return len(fields) == 5 and all(re.fullmatch(f"{atom}(,{atom})*", f) for f in fields)


def _valid_zone(zone: str) -> bool:
    """validateTimeZone: time.LoadLocation must know it (and no `Local`)."""
    if zone.lower() == "local":
        return False
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True
