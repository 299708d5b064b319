"""What Google's APIs refuse, found before `pulumi up`: every value the GCP stack's plan sends is checked against
the request member's schema in Google's own API definitions (the discovery documents google-api-python-client
bundles: enums, formats such as int32, int64-as-string and google-duration, path-parameter patterns), and
against the limits the members' descriptions state (ids, lengths, ranges), with GCP's label rules. The table
of resource type -> API method -> members is `gcp_api_table.py`; it is itself checked against the documents,
and a plan resource type or input it does not cover fails the test. Values unknown at preview are skipped and
counted. Here: what does not depend on the stack (the table against the documents, one refused value per kind
of check on gcp-dev, names built from the stack name); the coverage and value checks of every GCP stack (dev,
staging, prod) are in test_infra_gcp_azure_api_values.py."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from api_paths import mutated, number
from gcp_api_check import check_plan, document, member, schema_problem, uncovered
from gcp_api_rules import LABEL_MEMBERS, RULES, said
from gcp_api_table import TABLE, Call
from infra_fixtures import Plan

from infra.config import limits

STACK = "gcp-dev"


def _labels_the_table_reaches() -> set[tuple[str, str]]:
    out = set()
    for calls in TABLE.values():
        for call in calls:
            for path in [*call.members.values(), *(f"?{p}" for p in call.params)]:
                m = member(call, path)
                out.add((call.api, m.label))
                if m.schema.get("type") == "array":
                    out.add((call.api, f"{m.label}[]"))
    return out


def test_every_method_and_member_the_table_names_exists_in_the_discovery_documents() -> None:
    missing = []
    for token, calls in TABLE.items():
        for call in calls:
            for path in [*call.members.values(), *(f"?{p}" for p in call.params)]:
                try:
                    member(call, path)
                except KeyError as e:
                    missing.append(f"{token}: {e}")
    assert not missing, "\n".join(missing)
    # The rules and label members name members the table reaches (a typo in a key would never fire).
    reached = _labels_the_table_reaches()
    assert not set(RULES) - reached, set(RULES) - reached
    labels = {(api, m) for api, ms in LABEL_MEMBERS.items() for m in ms}
    assert not labels - reached, labels - reached


@pytest.mark.parametrize(
    ("call", "path", "words"),
    [
        (Call("storage.v1", "storage.buckets.insert", {}), "iamConfiguration.publicAccesPrevention", "publicAcces"),
        (Call("container.v1", "container.projects.locations.clusters.nodePools.create", {}), "nodePool.nodeConfig",
         "nodeConfig"),
        (Call("cloudkms.v1", "cloudkms.projects.locations.keyRings.create", {}), "?keyringId", "keyringId"),
        (Call("pubsub.v1", "pubsub.projects.topics.insert", {}), "labels", "no method"),
    ],
)  # fmt: skip
def test_a_typo_in_the_table_is_reported(call: Call, path: str, words: str) -> None:
    with pytest.raises(KeyError, match=words):
        member(call, path)


def test_the_formats_mean_what_google_means() -> None:
    duration = {"type": "string", "format": "google-duration"}
    assert schema_problem("7776000s", duration) is None and schema_problem("0.5s", duration) is None
    assert schema_problem("90d", duration) and schema_problem("7776000", duration)
    int64 = {"type": "string", "format": "int64"}
    assert schema_problem("1800", int64) is None and schema_problem(1800, int64) is None
    assert schema_problem("1800.5", int64) and schema_problem(2**63, int64)
    assert schema_problem(2**31, {"type": "integer", "format": "int32"})
    # Compute's patterns come without anchors: the whole value must match all the same.
    name = document("compute.v1")["schemas"]["Network"]["properties"]["name"]
    assert schema_problem("mlp-dev-vpc", name) is None and schema_problem("mlp-dev-vpc-", name)


def _mutated(p: Plan, name: str, path: str, value: Any) -> Plan:
    return Plan(mutated(p.doc, name, "gcp", path, value))


P = "mlp-gcp-dev-"
LABELS = {"cost-centre": "cc-ml-1001"}
# (resource, input path, refused value, words the message must hold): one per kind of check
REFUSED = [
    (f"{P}gke-gpu", "nodeConfig.taints.0.effect", "NoSchedule", "not in the enum"),
    (f"{P}gke-gpu", "nodeConfig.diskSizeGb", 100.5, "int32"),
    (f"{P}gke-gpu", "initialNodeCount", 2.0**31, "outside int32 range"),
    (f"{P}audit-budget", "amount.specifiedAmount.units", "1800.50", "int64"),
    (f"{P}key-key", "rotationPeriod", "90d", "not a google-duration"),
    (f"{P}key-key", "rotationPeriod", "3600s", "outside 86400..3.1536e+09 s"),
    (f"{P}key-key", "destroyScheduledDuration", "3600s", "kms/docs/destroy-restore"),
    (f"{P}gke-vpc", "name", "mlp_gcp_dev_vpc", "does not match the pattern"),
    (f"{P}budget-notifications-topic", "name", "budget/alerts", "^projects/[^/]+/topics/[^/]+$"),
    (f"{P}budget-notifications-subscription", "name", "goog-budget-job", "not start with goog"),
    (f"{P}budget-notifications-subscription", "ackDeadlineSeconds", 5.0, "outside 10..600 s"),
    (f"{P}budget-notifications-subscription", "messageRetentionDuration", "300s", "outside 600..2.6784e+06 s"),
    (f"{P}identities-trainer", "accountId", "mlp-gcp-dev-ci-", "6-30 characters matching"),
    (f"{P}identities-trainer", "displayName", "é" * 51, "102 bytes; at most 100"),
    (f"{P}key-ring", "name", "mlp.gcp.dev", "[a-zA-Z0-9_-]{1,63}"),
    (f"{P}registry-serving", "repositoryId", "Serving", "not a repository id"),
    (f"{P}buckets-raw", "name", "acme-google-raw", "not a bucket name"),
    (f"{P}buckets-raw", "storageClass", "STANDART", "the description's values"),
    (f"{P}buckets-raw", "publicAccessPrevention", "enforce", "['inherited', 'enforced']"),
    (f"{P}buckets-raw", "lifecycleRules.0.action.type", "delete", "the description's values"),
    (f"{P}buckets-raw", "uniformBucketLevelAccess", "true", "expected a boolean"),
    (f"{P}buckets-raw", "labels", {"Cost-Centre": "cc-ml-1001"}, "label key 'Cost-Centre'"),
    (f"{P}buckets-raw", "labels", {"owner": "ML Platform"}, "label 'owner' value 'ML Platform'"),
    (f"{P}buckets-raw", "labels", {f"k{i}": "v" for i in range(64)}, "65 labels with the provider's goog-pulumi-provisioned; at most 64"),
    (f"{P}gke", "name", "m" * 41, "up to 40"),
    (f"{P}audit-budget", "displayName", "b" * 61, "at most 60"),
    (f"{P}audit-budget", "allUpdatesRule.monitoringNotificationChannels", [f"c{i}" for i in range(6)], "at most 5"),
    (f"{P}audit-budget", "allUpdatesRule.schemaVersion", "1.1", "not one of ['1.0']"),
    (f"{P}audit-log-bucket", "retentionDays", 4000.0, "outside 1..3650 days"),
    (f"{P}audit-log-bucket", "bucketId", "_audit", "at most 100"),
    (f"{P}audit-sink", "name", "a" * 101, "at most 100"),
    (f"{P}serving-restarts", "combiner", "XOR", "not in the enum"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "path", "value", "words"), REFUSED, ids=[f"{r[1]}={r[2]!r}"[:40] for r in REFUSED]
)
def test_a_value_google_refuses_fails_naming_stack_resource_property_value_and_constraint(
    plans: dict[str, Plan], name: str, path: str, value: Any, words: str
) -> None:
    out = check_plan(STACK, _mutated(plans[STACK], name, path, value))
    assert len(out.violations) == 1, out.violations
    (message,) = out.violations
    assert message.startswith(f"{STACK}: {name} (") and path.split(".")[-1] in message, message
    assert repr(number(value))[:20] in message or str(value) in message, message
    assert words in message, message


def test_a_resource_type_or_input_the_table_lacks_fails(plans: dict[str, Plan]) -> None:
    doc = copy.deepcopy(plans[STACK].doc)
    doc["resources"].append({**doc["resources"][-1], "type": "gcp:sql/databaseInstance:DatabaseInstance",
                             "custom": True, "name": "db", "inputs": {"name": "db"}})  # fmt: skip
    added = _mutated(Plan(doc), f"{P}buckets-raw", "softDeletePolicy", {"retentionDurationSeconds": 0.0})
    problems = uncovered(added)
    assert any("gcp:sql/databaseInstance:DatabaseInstance is not in" in p for p in problems), problems
    assert any("input softDeletePolicy.retentionDurationSeconds maps to no API member" in p for p in problems)


def test_a_changed_description_fails_instead_of_checking_a_stale_limit() -> None:
    with pytest.raises(RuntimeError, match="no longer says"):
        RULES[("iam.v1", "CreateServiceAccountRequest.accountId")]("mlp-dev-trainer", "The account id.")


def test_every_resource_waits_for_the_api_its_methods_are_served_by() -> None:
    """infra/gcp/services.py enables the APIs and makes each resource type wait for its own; a type whose
    methods a Google API serves that it does not wait for fails with SERVICE_DISABLED on a fresh project.
    The API is the discovery document's own host (rootUrl). Service Usage, which enables the others, is
    on by default in every new project (cloud.google.com/service-usage/docs/enabled-service#default)."""
    from urllib.parse import urlparse

    from infra.gcp.services import apis_for

    missing = [
        f"{token}: {call.method} is served by {host}, not in {apis_for(token)}"
        for token, calls in TABLE.items()
        for call in calls
        if (host := urlparse(document(call.api)["rootUrl"]).hostname) != "serviceusage.googleapis.com"
        and host not in apis_for(token)
    ]
    assert not missing, "\n".join(missing)


# Names built from the stack name: refused when the stack is read, with Google's bound named ----------------


def test_the_service_account_bound_is_the_one_the_iam_api_states() -> None:
    doc = document("iam.v1")["schemas"]["CreateServiceAccountRequest"]["properties"]["accountId"][
        "description"
    ]
    found = said(doc, r"must be (\d+)-(\d+) characters long, and match the regular expression `([^`]+)`")
    bound = limits.GCP_SERVICE_ACCOUNT_ID
    assert (bound.minimum, bound.maximum, limits.GCP_SERVICE_ACCOUNT_ID_PATTERN) == (
        int(found[1]), int(found[2]), found[3],
    )  # fmt: skip


def test_the_bootstrap_pool_bound_is_the_one_the_iam_api_states() -> None:
    create = document("iam.v1")["resources"]["projects"]["resources"]["locations"]["resources"][
        "workloadIdentityPools"
    ]["methods"]["create"]
    found = said(
        create["parameters"]["workloadIdentityPoolId"]["description"],
        r"(\d+)-(\d+) characters, and may contain the characters \[a-z0-9-\]\. The prefix `gcp-` is reserved",
    )
    bound = limits.GCP_WORKLOAD_IDENTITY_POOL_ID
    assert (bound.minimum, bound.maximum) == (int(found[1]), int(found[2]))
    pattern = limits.GCP_WORKLOAD_IDENTITY_POOL_ID_PATTERN
    assert re.fullmatch(pattern, "eu-ml-github") and not re.fullmatch(pattern, "gcp-ml-github")
    assert not re.fullmatch(pattern, "EU_ml-github")


@pytest.mark.parametrize(
    "stack",
    [
        "gcp-staging-europe-sw1",  # 22: cut to `mlp-gcp-staging-europe-sw1-ci-`, ending in '-'
        "gcp-staging-europe-sw1-abc",  # 26: every identity cut to `mlp-gcp-staging-europe-sw1-abc`
        "Gcp.Dev",  # Pulumi allows it; Google ids, labels and bucket names do not
    ],
)
def test_a_stack_name_google_ids_cannot_hold_is_refused_at_preview(stack: str) -> None:
    from infra import config
    from infra import plan as planner

    cfg = config.parse(config.project_keys(planner.stack_config(STACK)), stack=stack)
    with pytest.raises(
        config.ConfigError, match=r"stack: .*CreateServiceAccountRequest.*at most 14 characters"
    ):
        planner.run(cfg, planner.stack_config(STACK))


def test_a_stack_whose_cut_ids_google_accepts_keeps_the_ids_it_was_deployed_with() -> None:
    """16 characters: `mlp-<stack>-ci-deployer` has 32 and was cut to 30; refusing it now, or changing the
    id, would replace the deployed account."""
    from infra import config
    from infra import plan as planner

    stack = "gcp-staging-eu-1"
    cfg = config.parse(config.project_keys(planner.stack_config(STACK)), stack=stack)
    p = Plan(planner.run(cfg, planner.stack_config(STACK)))
    ids = sorted(r["inputs"]["accountId"] for r in p.of_type("gcp:serviceaccount/account:Account"))
    assert "mlp-gcp-staging-eu-1-ci-deploy" in ids and len(set(ids)) == len(ids) == 6, ids
    assert not check_plan(stack, p).violations


def test_the_longest_stack_name_that_fits_passes_the_whole_check() -> None:
    from infra import config
    from infra import plan as planner

    stack = "gcp-production"
    assert len(stack) == 14
    cfg = config.parse(config.project_keys(planner.stack_config(STACK)), stack=stack)
    p = Plan(planner.run(cfg, planner.stack_config(STACK)))
    out = check_plan(stack, p)
    assert not out.violations and out.checked > 350, out.violations
    ids = [r["inputs"]["accountId"] for r in p.of_type("gcp:serviceaccount/account:Account")]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(rf"mlp-{stack}-[a-z-]+", i) for i in ids), ids


def test_more_tags_than_gcp_labels_hold_are_refused_at_config_time(plans: dict[str, Plan]) -> None:
    from infra import config
    from infra import plan as planner

    values = config.project_keys(planner.stack_config(STACK))
    tags = json.loads(values["tags"])
    # The plan's labels: the stack's tags plus the platform's own (and the provider adds goog-pulumi-provisioned).
    bucket = plans[STACK].named(f"{P}buckets-raw")["inputs"]["labels"]
    assert len(bucket) == len(tags) + 3 and limits.GCP_LABELS.maximum == 64
    for count, refused in ((60, False), (61, True)):
        values["tags"] = json.dumps({**tags, **{f"team-{i}": "x" for i in range(count - len(tags))}})
        if not refused:
            config.parse(values, stack=STACK)
            continue
        with pytest.raises(
            config.ConfigError, match=r"tags: .*65 labels; GCP takes >= 0 and <= 64.*remove 1"
        ):
            config.parse(values, stack=STACK)
