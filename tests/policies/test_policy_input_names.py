"""The rules read, and the fixtures write, the providers' own input names (the Pulumi SDKs' Args classes).

A rule reading a name the provider does not have (`accessControlPolicy.grants` on aws:s3/bucket:Bucket,
whose inline grants are `grants[].uri`) never sees the key on a real plan: a check on "key == bad value"
cannot fire. A fixture written with the same wrong name hides that from every mutant test. So: record what
the rules read over the real plans and every mutant case (policy_reads), what the fixtures and mutations
write (a diff against the compliant fixture), and resolve each path in provider_schema.
"""

from __future__ import annotations

import copy
import sys
import types
from collections.abc import Callable
from typing import Any

import policy_fixtures as fx
import policy_input_names as names
import policy_mutants_cluster
import policy_mutants_operations
import policy_mutants_storage
import provider_schema
import pytest
from policy_cases import CASES as ISSUE_CASES
from policy_cases_unknown import CASES as UNKNOWN_CASES
from policy_mutators import S3, Plan

from policies.analyze import plan_from_dict, to_resources
from policies.rules import Context, Rule, evaluate

FIXTURES: dict[str, Callable[[], Plan]] = {
    "aws": fx.aws_stack,
    "aws-prod": lambda: fx.aws_stack("prod", "prod"),
    "gcp": fx.gcp_stack,
    "azure": fx.azure_stack,
}
# (id, compliant fixture, mutation) of every mutant case; the unknown-value cases once with the unknown
# sentinel and once with their known compliant value.
CASES: list[tuple[str, Callable[[], Plan], Callable[[Plan], None]]] = [
    *((c[0], c[1], c[2]) for c in policy_mutants_storage.CASES),
    *((c[0], c[1], c[2]) for c in policy_mutants_cluster.CASES),
    *((c[0], c[1], c[2]) for c in policy_mutants_operations.CASES),
    *((c[0], c[1], c[2]) for c in ISSUE_CASES),
    *((f"{c[0]}-unknown", c[1], c[4](fx.UNKNOWN)) for c in UNKNOWN_CASES),
    *((f"{c[0]}-known", c[1], c[4](c[5])) for c in UNKNOWN_CASES),
]
PUBLIC_GRANT = {
    "type": "Group",
    "uri": "http://acs.amazonaws.com/groups/global/AllUsers",
    "permissions": ["READ"],
}


def _all_types(plans: list[Plan]) -> set[str]:
    return {r["type"] for p in plans for r in p["resources"]}


@pytest.fixture(scope="module")
def mutants() -> list[tuple[str, Plan, Plan]]:
    """(case id, compliant fixture, mutated plan) of every case, built once for the module."""
    return [(cid, *names.mutated(make, mutate)) for cid, make, mutate in CASES]


def test_rules_read_provider_input_names(
    committed_plans: dict[str, Plan], mutants: list[tuple[str, Plan, Plan]]
) -> None:
    plans = [*committed_plans.values(), *(m for _, _, m in mutants), *(f() for f in FIXTURES.values())]
    reads = set().union(*(names.reads(p) for p in plans))
    assert reads, "nothing was recorded: the recorder no longer sees the rules' reads"
    problems = names.read_problems(reads, _all_types(plans))
    assert problems == [], (
        "rules read inputs no provider defines (a check that can never fire):\n" + "\n".join(problems)
    )


@pytest.mark.parametrize("stack", sorted(FIXTURES))
def test_fixture_inputs_are_provider_inputs(stack: str) -> None:
    problems = names.write_problems(names.written(None, FIXTURES[stack]()), stack)
    assert problems == [], "\n".join(problems)


def test_mutations_write_provider_inputs(mutants: list[tuple[str, Plan, Plan]]) -> None:
    problems = [
        p for cid, base, plan in mutants for p in names.write_problems(names.written(base, plan), cid)
    ]
    assert problems == [], "\n".join(problems)


def test_checker_reports_a_rule_reading_a_misspelt_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker can fail: a rule module reading `versionning` (and a nested misspelling) is reported."""
    module = types.ModuleType("policies.rules.misspelt_probe")
    exec(  # a rule module of its own, so that the recorder patches its `get` like any other's
        "from policies.rules.core import get\n"
        "def check(r, ctx):\n"
        "    get(r.inputs, 'versionning.enabled')\n"
        "    get(r.inputs, 'serverSideEncryptionConfiguration.rule.applyServerSideEncryptionByDefualt')\n"
        "    r.inputs.get('tags', {}).get('any-tag-is-fine')\n"
        "    return []\n",
        module.__dict__,
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)
    rule = Rule(
        name="misspelt-probe",
        description="test",
        kind="resource",
        severity="low",
        enforcement="advisory",
        remediation="test",
        url="https://example.invalid",
        validate=module.check,
        applies_to=lambda t: t == S3,
    )
    problems = names.read_problems(names.reads(fx.aws_stack(), [rule]))
    assert len(problems) == 2, problems
    nested, top = problems
    assert "'versionning.enabled'" in top and "[did you mean versioning?]" in top
    assert "[did you mean applyServerSideEncryptionByDefault?]" in nested


def test_checker_reports_a_fixture_writing_a_misspelt_key() -> None:
    base = fx.aws_stack()
    plan = copy.deepcopy(base)
    bucket = fx.find(plan, S3, "data")["inputs"]
    bucket["forceDestory"] = True
    bucket.setdefault("tags", {})["any-tag-is-fine"] = "x"
    problems = names.write_problems(names.written(base, plan), "misspelt")
    assert problems == [
        "misspelt writes aws:s3/bucket:Bucket: 'forceDestory' is no provider input (at <inputs>: "
        "pulumi_aws.s3.bucket.BucketArgs has no input 'forceDestory') [did you mean forceDestroy?]"
    ]


def test_schema_resolves_through_lists_maps_and_kubernetes_objects() -> None:
    assert provider_schema.unresolved("aws:s3/bucket:Bucket", ("grants", "0", "uri")) is None
    assert provider_schema.unresolved("aws:s3/bucket:Bucket", ("grants", "uri")) is not None  # list: index it
    dep = ("spec", "template", "spec", "containers", "0", "securityContext", "runAsNonRoot")
    assert provider_schema.unresolved("kubernetes:apps/v1:Deployment", dep) is None
    annotation = ("metadata", "annotations", "service.beta.kubernetes.io/aws-load-balancer-scheme")
    assert provider_schema.unresolved("kubernetes:core/v1:Service", annotation) is None
    assert provider_schema.unresolved("kubernetes:helm.sh/v3:Release", ("values", "any", "depth")) is None
    # a resource type named like a nested input type: the resource's own Args, not Bucket's inline block
    assert (
        provider_schema.unresolved("aws:s3/bucketVersioning:BucketVersioning", ("versioningConfiguration",))
        is None
    )
    assert "defines no resource" in (provider_schema.unresolved("aws:s3/bukket:Bukket", ()) or "")


def _findings(plan: Plan) -> set[tuple[str, str | None, str]]:
    p = plan_from_dict(plan)
    return {(n, f.urn, f.message) for n, f in evaluate(to_resources(p), Context(environment=p.environment))}


def test_public_inline_grant_on_a_real_bucket_is_caught(committed_plans: dict[str, Plan]) -> None:
    """A real stack's bucket given an inline public ACL grant (pulumi-aws `Bucket.grants[].uri`): the rule
    used to read `accessControlPolicy.grants`, BucketAcl's name, on the bucket, and never saw it."""
    base = committed_plans["dev"]
    mutant: dict[str, Any] = copy.deepcopy(base)
    bucket = next(r for r in mutant["resources"] if r["type"] == S3)
    bucket["inputs"]["grants"] = [PUBLIC_GRANT]
    new = _findings(mutant) - _findings(base)
    assert {(n, u) for n, u, _ in new} == {("s3-no-public-acl-or-policy", bucket["urn"])}, sorted(new)


# azure-native v2's token (v3 moved it to `monitor`): plans rendered with v2 still carry it (core.py).
OLD_TOKENS = {"azure-native:insights:DiagnosticSetting"}


def test_path_tables_name_provider_inputs() -> None:
    """The rules' own tables of paths (`[]` walks a list), read only where a plan has the key: a wrong
    name there is silent on every plan, so each is resolved whether or not a plan exercises it."""
    from policies.rules import data_flows, keys

    tables = [(t, p) for t, paths in keys.KEY_REFERENCES.items() for p in paths]
    tables += [(t, p) for t, (_, flows) in data_flows.FLOWS.items() for p, _ in flows]
    problems = [
        why
        for t, p in tables
        if t not in OLD_TOKENS
        and (why := provider_schema.unresolved(t, tuple(p.replace("[]", ".0").split(".")))) is not None
    ]
    assert problems == [], "\n".join(problems)
