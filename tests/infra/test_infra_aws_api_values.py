"""What a real AWS account refuses, found before `pulumi up`: every value the AWS stacks' plans send is checked
against the member's shape in AWS's own API definitions (botocore's service models: enums, patterns, lengths,
ranges, list sizes, and the values a member's documentation lists where the model has no enum). The table of
resource type -> API call -> members is `aws_api_table.py`; it is itself checked against botocore, and a plan
resource type or input it does not cover fails the test. Values unknown at preview are skipped and counted."""

from __future__ import annotations

import copy
import fnmatch
import json
from typing import Any

import jsonschema
import pytest
from api_paths import mutated
from aws_api_check import PATTERNS, _model, _number, _unknown, api_shape, check_plan, uncovered
from aws_api_table import TABLE, Call
from infra_fixtures import Plan, aws_iam_definition

from infra.config import limits

AWS = ("dev", "staging", "prod")


# Tests ---------------------------------------------------------------------------------------------------


def test_every_member_the_table_names_exists_in_botocore() -> None:
    missing = []
    for token, calls in TABLE.items():
        for call in calls:
            try:
                _model(call.service).operation_model(call.operation)
            except Exception as e:  # botocore's OperationNotFoundError
                missing.append(f"{token}: {call.service} has no operation {call.operation} ({e})")
                continue
            for plan_path, member_path in call.members.items():
                try:
                    api_shape(call, member_path)
                except KeyError as e:
                    missing.append(f"{token}: {plan_path} -> {e}")
            missing += [
                f"{token}: transform for unmapped {k}" for k in call.transforms if k not in call.members
            ]
    assert not missing, "\n".join(missing)


def test_a_typo_in_the_table_is_reported() -> None:
    with pytest.raises(KeyError, match="imageTagMutabilty"):
        api_shape(Call("ecr", "CreateRepository", {}), "imageTagMutabilty")


def test_java_patterns_compile_and_mean_what_aws_means() -> None:
    budgets, iam = _model("budgets"), _model("iam")
    name = PATTERNS(budgets.shape_for("BudgetName").metadata["pattern"])
    assert name.fullmatch("mlp-dev-monthly") and not name.fullmatch("a:b")
    assert not name.fullmatch("x <SCRIPT>alert(1)</script>")  # the case-insensitive part, after the flag
    tag = PATTERNS(iam.shape_for("tagKeyType").metadata["pattern"])
    assert tag.fullmatch("cost-centre") and tag.fullmatch("Kostenstelle-ä") and not tag.fullmatch("a*b")
    asg = PATTERNS(_model("autoscaling").shape_for("TagKey").metadata["pattern"])
    assert asg.fullmatch("k8s.io/cluster-autoscaler/node-template/label/a 😀") and not asg.fullmatch("\x00")


@pytest.mark.parametrize("stack", AWS)
def test_the_table_covers_every_aws_resource_and_input_of_the_plan(
    plans: dict[str, Plan], stack: str
) -> None:
    problems = uncovered(plans[stack])
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stack", AWS)
def test_every_value_the_plan_sends_is_one_the_aws_api_accepts(plans: dict[str, Plan], stack: str) -> None:
    out = check_plan(stack, plans[stack])
    assert not out.violations, "\n".join(out.violations)
    # Not vacuous: most values are known at preview (ids and ARNs of other resources are not).
    assert out.checked > 300 and out.unknown < out.checked / 2, (out.checked, out.unknown)


def _mutated(p: Plan, name: str, path: str, value: Any) -> Plan:
    return Plan(mutated(p.doc, name, "aws", path, value))


# (resource, input path, refused value, words the message must hold)
REFUSED = [
    ("mlp-dev-registry-serving", "imageTagMutability", "IMUTABLE", "not in ImageTagMutability enum"),
    ("mlp-dev-identities-trainer", "name", "r" * 65, "length 65; roleNameType takes 1..64"),
    ("mlp-dev-identities-trainer", "name", "mlp dev trainer", "roleNameType pattern"),
    ("mlp-dev-eks-control-plane-logs", "retentionInDays", 8.0, "not one of CloudWatch Logs' retention"),
    ("mlp-dev-eks-gpu", "scalingConfig.maxSize", 0.0, "Capacity takes 1..∞"),
    ("mlp-dev-eks-gpu", "taints.0.effect", "NoSchedule", "TaintEffect enum"),
    ("mlp-dev-eks-gpu", "labels", {"platform.eu-ml/" + "p" * 60: "gpu"}, "labelKey"),
    ("mlp-dev-audit-budget", "notifications.0.thresholdType", "PERCENT", "ThresholdType enum"),
    ("mlp-dev-eks-api-5xx", "treatMissingData", "notbreaching", "documented valid values"),
    ("mlp-dev-eks-api-5xx", "period", 90.0, "multiple of 60"),
    ("mlp-dev-key-key", "deletionWindowInDays", 31.0, "7..30"),
    ("mlp-dev-eks-gpu-template", "metadataOptions.httpTokens", "require", "HttpTokensState enum"),
]


@pytest.mark.parametrize(
    ("name", "path", "value", "words"), REFUSED, ids=[f"{r[1]}={r[2]!r}"[:40] for r in REFUSED]
)
def test_a_value_aws_refuses_fails_naming_stack_resource_property_value_and_constraint(
    plans: dict[str, Plan], name: str, path: str, value: Any, words: str
) -> None:
    out = check_plan("dev", _mutated(plans["dev"], name, path, value))
    assert len(out.violations) == 1, out.violations
    (message,) = out.violations
    assert message.startswith(f"dev: {name} (") and path.split(".")[-1] in message, message
    assert repr(_number(value) if not isinstance(value, dict) else value)[:20] in message, message
    assert words in message, message


def test_a_documented_retention_passes_where_its_neighbour_fails(plans: dict[str, Plan]) -> None:
    group = "mlp-dev-eks-control-plane-logs"
    assert not check_plan("dev", _mutated(plans["dev"], group, "retentionInDays", 7.0)).violations
    assert check_plan("dev", _mutated(plans["dev"], group, "retentionInDays", 8.0)).violations


def test_a_resource_type_the_table_lacks_fails(plans: dict[str, Plan]) -> None:
    doc = copy.deepcopy(plans["dev"].doc)
    doc["resources"].append({**doc["resources"][-1], "type": "aws:sqs/queue:Queue", "custom": True,
                             "name": "q", "inputs": {"name": "q"}})  # fmt: skip
    added_input = _mutated(Plan(doc), "mlp-dev-registry-serving", "imageTagMutabilityExclusionFilters", [])
    problems = uncovered(added_input)
    assert any("aws:sqs/queue:Queue is not in" in p for p in problems), problems
    assert any("input imageTagMutabilityExclusionFilters maps to no API member" in p for p in problems), (
        problems
    )


# Values that come from the stack: refused when the stack is read, with botocore's bound named ------------


def test_more_budget_emails_than_a_notification_takes_are_refused_at_config_time() -> None:
    from infra import config
    from infra import plan as planner

    values = config.project_keys(planner.stack_config("dev"))
    budget = json.loads(values["budget"])
    most = limits.aws_budget_subscribers().maximum
    # Subscribers takes 11, but only 10 of them e-mail (the 11th slot is the one SNS topic a notification may have).
    assert most == 10 and _model("budgets").shape_for("Subscribers").metadata["max"] == 11
    for count, refused in ((most, False), ((most or 0) + 1, True)):
        budget["alertEmails"] = [f"finops{i}@example.com" for i in range(count)]
        values["budget"] = json.dumps(budget)
        if not refused:
            config.parse(values, stack="dev")
            continue
        with pytest.raises(config.ConfigError, match=r"budget\.alertEmails.*botocore budgets model"):
            config.parse(values, stack="dev")


def test_a_stack_name_too_long_for_iam_role_names_is_refused_at_preview() -> None:
    from infra import config
    from infra import plan as planner

    # 42 characters still fits the buckets (63) but not `mlp-<stack>-cluster-autoscaler` in IAM's 64.
    cfg = config.parse(config.project_keys(planner.stack_config("dev")), stack="d" * 42)
    with pytest.raises(config.ConfigError, match=r"stack: .*roleNameType.*at most 41 characters"):
        planner.run(cfg, planner.stack_config("dev"))


# JSON documents sent as strings --------------------------------------------------------------------------

POLICY_INPUTS = {
    "aws:iam/role:Role": "assumeRolePolicy",
    "aws:iam/rolePolicy:RolePolicy": "policy",
    "aws:kms/key:Key": "policy",
    "aws:s3/bucketPolicy:BucketPolicy": "policy",
}


@pytest.mark.parametrize("stack", AWS)
def test_every_iam_action_in_every_policy_exists(plans: dict[str, Plan], stack: str) -> None:
    """Per AWS's service authorization reference (parliament's copy): a misspelt action is accepted by IAM
    and silently grants nothing, so the workload fails with AccessDenied at run time."""
    actions = {s["prefix"]: [a["privilege"].lower() for a in s["privileges"]] for s in aws_iam_definition()}
    unknown = []
    for r in plans[stack].iter_custom():
        if r["type"] not in POLICY_INPUTS or _unknown(raw := r["inputs"].get(POLICY_INPUTS[r["type"]], "")):
            continue
        statements = json.loads(raw)["Statement"]
        for s in statements if isinstance(statements, list) else [statements]:
            for action in [s["Action"]] if isinstance(s["Action"], str) else s["Action"]:
                prefix, _, name = action.partition(":")
                if not fnmatch.filter(actions.get(prefix, []), name.lower()):
                    unknown.append(f"{stack}: {r['name']} {POLICY_INPUTS[r['type']]}: {action}")
    assert not unknown, unknown


# docs.aws.amazon.com/AmazonECR/latest/userguide/lifecycle_policy_parameters.html
ECR_LIFECYCLE = {
    "type": "object", "required": ["rules"], "additionalProperties": False,
    "properties": {"rules": {"type": "array", "minItems": 1, "items": {
        "type": "object", "required": ["rulePriority", "selection", "action"], "additionalProperties": False,
        "properties": {
            "rulePriority": {"type": "integer", "minimum": 1},
            "description": {"type": "string"},
            "selection": {
                "type": "object", "required": ["tagStatus", "countType", "countNumber"],
                "additionalProperties": False,
                "properties": {
                    "tagStatus": {"enum": ["tagged", "untagged", "any"]},
                    "tagPatternList": {"type": "array", "items": {"type": "string"}},
                    "tagPrefixList": {"type": "array", "items": {"type": "string"}},
                    "countType": {"enum": ["imageCountMoreThan", "sinceImagePushed"]},
                    "countUnit": {"enum": ["days"]},
                    "countNumber": {"type": "integer", "minimum": 1},
                },
            },
            "action": {"type": "object", "required": ["type"], "properties": {"type": {"enum": ["expire"]}}},
        },
    }}},
}  # fmt: skip


@pytest.mark.parametrize("stack", AWS)
def test_ecr_lifecycle_policies_hold_only_documented_fields(plans: dict[str, Plan], stack: str) -> None:
    policies = plans[stack].of_type("aws:ecr/lifecyclePolicy:LifecyclePolicy")
    assert policies
    for r in policies:
        doc = json.loads(r["inputs"]["policy"])
        jsonschema.validate(doc, ECR_LIFECYCLE)
        priorities = [rule["rulePriority"] for rule in doc["rules"]]
        assert len(set(priorities)) == len(priorities), (r["name"], "rulePriority must be unique")


def test_the_lifecycle_schema_refuses_a_typo() -> None:
    bad = {"rules": [{"rulePriority": 1, "selection": {"tagStatus": "untaged", "countType": "imageCountMoreThan",
                                                        "countNumber": 10}, "action": {"type": "expire"}}]}  # fmt: skip
    with pytest.raises(jsonschema.ValidationError, match="untaged"):
        jsonschema.validate(bad, ECR_LIFECYCLE)
