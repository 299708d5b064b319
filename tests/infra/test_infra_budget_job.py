"""The budget cost job in the rendered plans (issue 13, item 4's BudgetForecastOverLimit): an hourly CronJob
running `python -m monitoring budget` in the training image on every stack, with arguments the CLI's own
parser accepts and that name the budget infra declares; its own identity (AWS: exactly `budgets:ViewBudget`
on that budget's ARN, checked against AWS's IAM definitions as parliament ships them; Azure: Cost
Management Reader on the budget's resource group, federated with the job's service account; GCP:
`roles/pubsub.subscriber` on the subscription of the budget's Pub/Sub topic only, by Workload Identity);
the drift job's hardening and egress; the rate from typed stack config."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from infra_fixtures import Plan, aws_iam_definition

from infra import config
from infra import plan as planner
from infra.config import EU_REGIONS, ConfigError
from infra.k8s import budget as budget_job
from infra.shape import BudgetJob
from monitoring.cli import _parser

CRON = "kubernetes:batch/v1:CronJob"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
REPO = Path(__file__).resolve().parents[2]
AWS_STACKS = ("dev", "staging", "prod")
JOB_STACKS = (*AWS_STACKS, "azure-dev", "gcp-dev")
COST_MANAGEMENT_READER = "72fafb9e-0641-4937-9268-a91bfd8191a3"
ACCOUNT = "123456789012"  # the mocks' account id


def k8s_obj(p: Plan, token: str, namespace: str, name: str) -> dict[str, Any]:
    (found,) = [
        r["inputs"]
        for r in p.of_type(token)
        if (r["inputs"]["metadata"].get("namespace"), r["inputs"]["metadata"]["name"]) == (namespace, name)
    ]
    return found


def pod_spec(cron: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


def declared_budget(p: Plan) -> tuple[str, str | None]:
    """The budget infra declares on this stack: its name, and its scope on Azure."""
    if p["cloud"] == "aws":
        return p.one("aws:budgets/budget:Budget")["inputs"]["name"], None
    if p["cloud"] == "gcp":  # the notifications name it by display name
        return p.one("gcp:billing/budget:Budget")["inputs"]["displayName"], None
    inputs = p.one("azure-native:consumption:Budget")["inputs"]
    return inputs["budgetName"], inputs["scope"]


@pytest.mark.parametrize("stack", JOB_STACKS)
def test_the_budget_cronjob_runs_the_cli_with_arguments_its_parser_accepts(
    plans: dict[str, Plan], stack: str
) -> None:
    p = plans[stack]
    cron = k8s_obj(p, CRON, "cost", "budget")
    assert (cron["spec"]["schedule"], cron["spec"]["timeZone"]) == (budget_job.SCHEDULE, "Etc/UTC")
    assert re.fullmatch(r"\d+ \* \* \* \*", cron["spec"]["schedule"]), "hourly"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    (container,) = pod_spec(cron)["containers"]
    assert container["command"] == ["python", "-m", "monitoring", "budget"]
    # The CLI's own parser: a renamed or misspelt flag exits here (SystemExit fails the test).
    args = _parser().parse_args(["budget", *container["args"]])
    name, scope = declared_budget(p)
    assert (args.cloud, args.budget, args.stack) == (p["cloud"], name, stack)
    assert args.out is None  # it pushes; nothing to write on a read-only root
    if p["cloud"] == "aws":
        assert (args.account_id, args.scope) == (ACCOUNT, None)
        # AWS Budgets are kept in USD (infra/config refuses anything else): the config's rate converts.
        assert args.eur_per_unit == planner.load_stack(stack).budget.eur_rate == 0.86
    elif p["cloud"] == "gcp":
        assert (args.subscription, args.scope, args.account_id) == (gcp_subscription_path(p), None, None)
        assert args.eur_per_unit is None  # the GCP budget is in EUR
    else:
        assert (args.scope, args.account_id, args.subscription) == (scope, None, None)
        assert args.eur_per_unit is None  # the Azure budget is in EUR
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {
        "MONITORING_PUSHGATEWAY_URL": "http://prometheus-prometheus-pushgateway.monitoring.svc:9091"
    }
    # The very image the drift job runs (the training image, by digest outside dev).
    (drift,) = pod_spec(k8s_obj(p, CRON, "drift", "drift"))["containers"]
    assert container["image"] == drift["image"]
    if stack in ("staging", "prod"):
        assert "@sha256:" in container["image"]


@pytest.mark.parametrize("stack", JOB_STACKS)
def test_the_budget_cronjob_is_hardened_like_the_drift_job(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    pod, drift = pod_spec(k8s_obj(p, CRON, "cost", "budget")), pod_spec(k8s_obj(p, CRON, "drift", "drift"))
    for key in ("securityContext", "automountServiceAccountToken", "nodeSelector", "restartPolicy"):
        assert pod[key] == drift[key], key
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,), (drift_container,) = pod["containers"], drift["containers"]
    assert container["securityContext"] == drift_container["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    resources = container["resources"]
    assert resources["requests"] == resources["limits"] and set(resources["limits"]) == {"cpu", "memory"}
    assert pod["serviceAccountName"] == "budget"
    sa = k8s_obj(p, "kubernetes:core/v1:ServiceAccount", "cost", "budget")
    assert sa["automountServiceAccountToken"] is False
    namespace = k8s_obj(p, "kubernetes:core/v1:Namespace", None, "cost")  # type: ignore[arg-type]
    drift_ns = k8s_obj(p, "kubernetes:core/v1:Namespace", None, "drift")  # type: ignore[arg-type]
    assert namespace["metadata"]["labels"] == drift_ns["metadata"]["labels"]  # Pod Security "restricted"
    if p["cloud"] == "gcp":
        assert sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": GCP_BUDGET_SA}
    elif p["cloud"] == "azure":
        assert set(sa["metadata"]["annotations"]) == {"azure.workload.identity/client-id"}
        labels = k8s_obj(p, CRON, "cost", "budget")["spec"]["jobTemplate"]["spec"]["template"]["metadata"]
        assert labels["labels"]["azure.workload.identity/use"] == "true"
    else:
        assert sa["metadata"].get("annotations", {}) == {}  # EKS Pod Identity binds by namespace and name


@pytest.mark.parametrize("stack", JOB_STACKS)
def test_the_budget_job_reaches_dns_its_identity_https_and_the_pushgateway_only(
    plans: dict[str, Plan], stack: str
) -> None:
    p = plans[stack]
    assert k8s_obj(p, NETPOL, "cost", "default-deny")["spec"] == {
        "podSelector": {},
        "policyTypes": ["Ingress", "Egress"],
    }
    mine = k8s_obj(p, NETPOL, "cost", "budget")["spec"]
    assert mine["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "budget"}}
    assert mine["policyTypes"] == ["Egress"]
    # The same egress as the drift job (DNS, the cloud identity endpoint, public HTTPS, the Pushgateway).
    assert mine["egress"] == k8s_obj(p, NETPOL, "drift", "drift")["spec"]["egress"]
    ports = [[(x["protocol"], x["port"]) for x in rule["ports"]] for rule in mine["egress"]]
    identity = {"aws": [[("TCP", 80.0)]], "gcp": [[("TCP", 80.0)], [("TCP", 988.0)]], "azure": []}[p["cloud"]]
    assert ports == [[("UDP", 53.0), ("TCP", 53.0)], *identity, [("TCP", 443.0)], [("TCP", 9091.0)]]


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_the_aws_budget_role_may_view_exactly_the_stacks_budget(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    role = f"mlp-{stack}-identities-budget"
    (access,) = [r for r in p.of_type("aws:iam/rolePolicy:RolePolicy") if r["name"].startswith(f"{role}-")]
    assert access["name"] == f"{role}-access"  # no key policy, no other inline policy
    attachments = p.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    assert not [r["name"] for r in attachments if r["name"].startswith(role)]  # no managed policy either
    name, _ = declared_budget(p)
    arn = f"arn:aws:budgets::{ACCOUNT}:budget/{name}"
    assert json.loads(access["inputs"]["policy"]) == {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ReadStackBudget", "Effect": "Allow", "Action": ["budgets:ViewBudget"], "Resource": [arn]}
        ],
    }
    # AWS's own definitions: ViewBudget exists, is a Read action on the `budget` resource type, and the
    # ARN has that type's format.
    (service,) = [s for s in aws_iam_definition() if s["prefix"] == "budgets"]
    (view,) = [a for a in service["privileges"] if a["privilege"] == "ViewBudget"]
    assert view["access_level"] == "Read"
    assert [t["resource_type"] for t in view["resource_types"]] == ["budget*"]
    (budget_type,) = [r for r in service["resources"] if r["resource"] == "budget"]
    pattern = re.escape(budget_type["arn"]).replace(r"\$\{Partition\}", "aws")
    pattern = pattern.replace(r"\$\{Account\}", r"\d{12}").replace(r"\$\{BudgetName\}", r"[^/]+")
    assert re.fullmatch(pattern, arn), (budget_type["arn"], arn)
    binding = p.named(f"{role}-binding")["inputs"]
    assert (binding["namespace"], binding["serviceAccount"]) == ("cost", "budget")


def test_the_azure_budget_identity_reads_costs_on_the_budgets_resource_group_only(
    plans: dict[str, Plan], updates: dict[str, Plan]
) -> None:
    p = plans["azure-dev"]
    prefix = "mlp-azure-dev-identities-budget"
    mine = [r for r in p.of_type("azure-native:authorization:RoleAssignment") if r["name"].startswith(prefix)]
    assert [r["name"] for r in mine] == [f"{prefix}-cost-reader"]
    (assignment,) = mine
    _, scope = declared_budget(p)
    assert (
        assignment["inputs"]["scope"]
        == scope
        == ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-mlp-azure-dev")
    )
    assert assignment["inputs"]["roleDefinitionId"].endswith(f"/roleDefinitions/{COST_MANAGEMENT_READER}")
    assert "condition" not in assignment["inputs"]
    federation = p.named(f"{prefix}-federation")["inputs"]
    assert federation["subject"] == "system:serviceaccount:cost:budget"
    assert federation["audiences"] == ["api://AzureADTokenExchange"]
    # After `up` (ids known): the assignment's principal is the budget identity, and the job's service
    # account carries that identity's client id.
    u = updates["azure-dev"]
    # (the mocks answer a managed identity's principalId / clientId as `<name>-principal` / `<name>-client`)
    assert u.named(prefix)["type"] == "azure-native:managedidentity:UserAssignedIdentity"
    assert u.named(f"{prefix}-cost-reader")["inputs"]["principalId"] == f"{prefix}-principal"
    sa = k8s_obj(u, "kubernetes:core/v1:ServiceAccount", "cost", "budget")
    assert sa["metadata"]["annotations"] == {"azure.workload.identity/client-id": f"{prefix}-client"}


def gcp_subscription_path(p: Plan) -> str:
    sub = p.one("gcp:pubsub/subscription:Subscription")["inputs"]
    return f"projects/{sub['project']}/subscriptions/{sub['name']}"


GCP_BUDGET_SA = (
    "mlp-gcp-dev-budget@acme-ml-platform-dev.iam.gserviceaccount.com"  # Pulumi.gcp-dev.yaml gcpProject
)


def test_gcp_budget_publishes_to_an_eu_topic_the_job_may_only_subscribe_to(plans: dict[str, Plan]) -> None:
    p = plans["gcp-dev"]
    topic = p.one("gcp:pubsub/topic:Topic")
    region = planner.load_stack("gcp-dev").region
    # Messages are stored in the stack's (EU) region only.
    assert topic["inputs"]["messageStoragePolicy"]["allowedPersistenceRegions"] == [region]
    assert region in EU_REGIONS["gcp"]
    project = topic["inputs"]["project"]
    # The budget sends every status update there, in the one schema the CLI parses.
    rule = p.one("gcp:billing/budget:Budget")["inputs"]["allUpdatesRule"]
    assert (rule["pubsubTopic"], rule["schemaVersion"]) == (
        f"projects/{project}/topics/{topic['inputs']['name']}",
        "1.0",
    )
    # Cloud Billing's publisher (billing-budget-alert@system) may publish to it: the topic's one grant.
    (publisher,) = p.of_type("gcp:pubsub/topicIAMMember:TopicIAMMember")
    assert (publisher["inputs"]["role"], publisher["inputs"]["member"], publisher["inputs"]["topic"]) == (
        "roles/pubsub.publisher", "serviceAccount:billing-budget-alert@system.gserviceaccount.com", topic["inputs"]["name"],
    )  # fmt: skip
    sub = p.one("gcp:pubsub/subscription:Subscription")["inputs"]
    assert (sub["topic"], "pushConfig" in sub) == (rule["pubsubTopic"], False)  # a pull subscription of it
    # The job's identity: exactly one grant anywhere, roles/pubsub.subscriber on that subscription.
    member = f"serviceAccount:{GCP_BUDGET_SA}"
    grants = [
        r
        for r in p.iter_custom()
        if r["inputs"].get("member") == member or member in r["inputs"].get("members", [])
    ]
    assert [(g["type"], g["inputs"]["role"], g["inputs"].get("subscription")) for g in grants] == [
        ("gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember", "roles/pubsub.subscriber", sub["name"])
    ]
    account = p.one("gcp:serviceaccount/account:Account", "-budget-notifications-job")["inputs"]
    assert f"{account['accountId']}@{project}.iam.gserviceaccount.com" == GCP_BUDGET_SA
    # ...bound by Workload Identity to the CronJob's service account, cost/budget, and nothing else.
    (binding,) = [r for r in p.of_type("gcp:serviceaccount/iAMMember:IAMMember") if "budget" in r["name"]]
    assert (binding["inputs"]["role"], binding["inputs"]["member"]) == (
        "roles/iam.workloadIdentityUser", f"serviceAccount:{project}.svc.id.goog[cost/budget]",
    )  # fmt: skip


def test_the_budget_rate_is_typed_stack_config_with_a_default_and_a_clear_error() -> None:
    cfg = planner.load_stack("dev")  # USD, no budget.eurPerUnit: the default rate
    job = BudgetJob(cli_args=("--cloud", "aws", "--account-id", ACCOUNT))
    assert budget_job.cli_args(cfg, job)[-2:] == ["--eur-per-unit", "0.86"]
    raw = config.project_keys(planner.stack_config("azure-dev"))
    gbp = {**raw, "budget": {**_budget_block(raw), "currency": "GBP"}}
    with pytest.raises(ConfigError, match=r"budget.eurPerUnit: .*set budget.eurPerUnit to EUR per 1 GBP"):
        config.parse(gbp, stack="azure-dev")
    parsed = config.parse({**gbp, "budget": {**gbp["budget"], "eurPerUnit": 1.17}}, stack="azure-dev")
    azure_job = BudgetJob(cli_args=("--cloud", "azure", "--scope", "/subscriptions/x/resourceGroups/y"))
    assert budget_job.cli_args(parsed, azure_job)[-2:] == ["--eur-per-unit", "1.17"]
    with pytest.raises(ConfigError, match="budget.eurPerUnit"):  # a rate for EUR would only mislead
        config.parse({**raw, "budget": {**_budget_block(raw), "eurPerUnit": 0.9}}, stack="azure-dev")
    with pytest.raises(ConfigError, match="budget.eurPerUnit"):  # typed: a positive number
        config.parse({**gbp, "budget": {**gbp["budget"], "eurPerUnit": -1}}, stack="azure-dev")


def _budget_block(raw: dict[str, Any]) -> dict[str, Any]:
    block = raw["budget"]
    return dict(json.loads(block) if isinstance(block, str) else block)
