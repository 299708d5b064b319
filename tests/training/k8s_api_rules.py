"""The API server's own checks on a Job's podFailurePolicy, which the OpenAPI schema (kubernetes-validate) lacks.

Ported from kubernetes/kubernetes pkg/apis/batch/validation/validation.go: `validatePodFailurePolicy`,
`validatePodFailurePolicyRule`, `validatePodFailurePolicyRuleOnExitCodes` and the podFailurePolicy checks of
`validateJobSpec`. The API server answers HTTP 422 for each message returned here (for example
`onExitCodes.values: Invalid value: []int32{0, 75, 69}: must be ordered`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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


def assert_accepted_by_apiserver(rendered: Any) -> int:
    """Fail with the API server's messages for every Job found in `rendered`; returns how many Jobs were checked."""
    specs = list(job_specs(rendered))
    errors = [e for spec in specs for e in pod_failure_policy_errors(spec)]
    assert not errors, "the API server would reject the Job (HTTP 422):\n" + "\n".join(errors)
    return len(specs)
