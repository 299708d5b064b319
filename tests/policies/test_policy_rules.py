"""Each rule: the compliant fixture stacks pass, and each mutant fails with exactly the expected violations.

Evaluated in-process (pure rule functions); tests/policies/test_policy_protocol.py runs the same rules through
the real pack process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import policy_cases
import policy_fixtures as fx
import policy_mutants_cluster
import policy_mutants_operations
import policy_mutants_storage
import pytest
from policy_mutators import EKS, S3, Case, Plan, _inputs

from policies.analyze import plan_from_dict, to_resources
from policies.rules import ALL_RULES, Context, evaluate
from policies.rules.key_hygiene import iso_days
from policies.rules.location import normalize


def violations(plan: Plan, config: dict[str, Any] | None = None) -> set[tuple[str, str | None]]:
    """(rule, resource name) per finding; an undetermined finding's name ends in '?'."""
    p = plan_from_dict(plan)
    found = evaluate(to_resources(p), Context(config=config or {}, environment=p.environment))
    return {
        (rule, (f.urn.rsplit("::", 1)[-1] + ("?" if f.undetermined else "")) if f.urn else None)
        for rule, f in found
    }


@pytest.mark.parametrize("make", [fx.aws_stack, fx.gcp_stack, fx.azure_stack], ids=["aws", "gcp", "azure"])
def test_compliant_fixtures_pass_every_rule(make: Callable[[], Plan]) -> None:
    assert violations(make()) == set()


def test_compliant_prod_fixture_passes() -> None:
    assert violations(fx.aws_stack("prod", "prod")) == set()


# The mutants live in policy_mutants_* (one module per group of rule sections) and policy_cases.
CASES: list[Case] = [
    *policy_mutants_storage.CASES,
    *policy_mutants_cluster.CASES,
    *policy_mutants_operations.CASES,
    *policy_cases.CASES,
]


@pytest.mark.parametrize(
    ("make", "mutate", "expected"),
    [c[1:] for c in CASES if c[3] is not None],
    ids=[c[0] for c in CASES if c[3] is not None],
)
def test_mutant_is_caught_exactly(
    make: Callable[[], Plan], mutate: Callable[[Plan], None], expected: set[tuple[str, str | None]]
) -> None:
    plan = make()
    mutate(plan)
    assert violations(plan) == expected


def test_provider_outside_eu_flags_every_inheriting_resource() -> None:
    plan = fx.aws_stack()
    _inputs(plan, "pulumi:providers:aws", "aws-eu")["region"] = "us-east-1"
    found = violations(plan)
    aws_names = {
        r["name"] for r in plan["resources"] if r["type"].startswith(("aws:", "pulumi:providers:aws"))
    }
    assert found == {("eu-data-residency", n) for n in aws_names}


def test_allowed_regions_config_admits_a_reviewed_region() -> None:
    plan = fx.aws_stack()
    _inputs(plan, S3, "data")["region"] = "eu-west-2"
    assert violations(plan, {"allowedRegions": ["eu-west-2"]}) == set()


def test_every_rule_has_a_mutant() -> None:
    caught = {rule for c in CASES if c[3] for rule, _ in c[3]} | {"eu-data-residency"}
    untested = {r.name for r in ALL_RULES} - caught - {"aws-iam-policy-lint"}  # Parliament: pack venv only
    assert untested == set()


def test_unknown_values_are_reported_as_undetermined_never_as_passing() -> None:
    plan = fx.aws_stack()
    # A policy document built from ARNs unknown at preview: the TLS rule cannot judge it either way.
    _inputs(plan, "aws:s3/bucketPolicy:BucketPolicy", "data-policy")["policy"] = fx.UNKNOWN
    _inputs(plan, EKS, "cluster")["vpcConfig"]["publicAccessCidrs"] = fx.UNKNOWN
    p = plan_from_dict(plan)
    found = evaluate(to_resources(p), Context(environment=p.environment))
    assert {(rule, f.urn.rsplit("::", 1)[-1], f.undetermined) for rule, f in found} == {
        ("s3-bucket-tls-only", "data", True),
        # the same unknown document: whether it opens the bucket to the public cannot be judged either
        ("s3-no-public-acl-or-policy", "data-policy", True),
        ("cluster-endpoint-restricted", "cluster", True),
    }


def test_guard_skips_other_types() -> None:
    rule = next(r for r in ALL_RULES if r.name == "gcs-public-access-prevention")
    assert not rule.applies_to("aws:s3/bucket:Bucket")
    assert rule.applies_to("gcp:storage/bucket:Bucket")


@pytest.mark.parametrize(
    ("cloud", "raw", "expected"),
    [
        ("gcp", "europe-west1-b", "europe-west1"),
        ("aws", "eu-south-2a", "eu-south-2"),
        ("azure", "West Europe", "westeurope"),
    ],
)
def test_location_normalisation(cloud: str, raw: str, expected: str) -> None:
    assert normalize(cloud, raw) == expected


@pytest.mark.parametrize(("text", "days"), [("P90D", 90), ("P3M", 90), ("7776000s", 90), ("P1Y", 365)])
def test_iso_days(text: str, days: float) -> None:
    assert iso_days(text) == days


def test_wire_values_as_the_engine_hands_them_to_a_pack() -> None:
    from policies.analyze import to_wire

    secret = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "[secret]"}
    ref = {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e", "urn": "urn:x", "id": ""}
    assert to_wire({"a": secret, "b": [ref], "c": "<unknown>", "d": 2.0}) == {
        "a": "[secret]",
        "b": [fx.UNKNOWN],
        "c": fx.UNKNOWN,
        "d": 2.0,
    }


def test_component_reference_becomes_its_urn() -> None:
    from policies.analyze import to_wire

    ref = {
        "4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e",
        "urn": "urn:pulumi:dev::p::c:m:C::x",
    }
    assert to_wire(ref) == "urn:pulumi:dev::p::c:m:C::x"


def test_coverage_gap_is_reported_for_an_unreviewed_type() -> None:
    """The coverage check can fail: a type no rule reads (residency does not count) and no reason covers."""
    from policies.evidence import coverage_for

    docs = [
        {
            "stack": "dev",
            "resources": [
                {
                    "urn": "u1",
                    "type": "aws:sagemaker/endpoint:Endpoint",
                    "name": "e",
                },  # only residency reads it
                {
                    "urn": "u2",
                    "type": "aws:s3/bucketV2:BucketV2",
                    "name": "b",
                },  # V2 token: the S3 rules read it
                {"urn": "u3", "type": "azure-native:storage/v20230101:StorageAccount", "name": "s"},
            ],
        }
    ]
    coverage = coverage_for(docs, {})
    assert coverage["aws:sagemaker/endpoint:Endpoint"]["rules"] == []
    assert "s3-bucket-public-access-block" in coverage["aws:s3/bucketV2:BucketV2"]["rules"]
    assert "encryption-at-rest-cmk" in coverage["azure-native:storage/v20230101:StorageAccount"]["rules"]
    assert coverage_for(docs, {"aws:sagemaker/*": "reviewed"})["aws:sagemaker/endpoint:Endpoint"]["reason"]
