"""Every GCP and Azure stack's plan judged by the cloud's own API definitions, each check written once and run
over every stack: the committed dev stacks and staging and prod. The judges are gcp_api_check.py (Google's
discovery documents) and azure_api_check.py (Microsoft's REST specs as the azure-mgmt SDKs carry them); what
does not depend on the stack (the tables against the documents, one mutation per kind of check, names built
from the stack name) is in test_infra_gcp_api_values.py and test_infra_azure_api_values.py.

Prod takes other code paths than dev (protected and retained keys and data, deletion protection, a locked audit
log bucket, on-demand serving pools, zone-redundant Azure SKUs, other pool sizes and budgets). No
`Pulumi.gcp-prod.yaml` or `Pulumi.azure-prod.yaml` is committed, so staging and prod are derived here: the
committed dev stack's cloud config (region, machine types, GPU type and price, network, project) with the
environment's own settings taken from the committed AWS stack of that environment (Pulumi.<env>.yaml:
environment, tags, pool sizes and spot, budget amount, digest-pinned images, checkpoint expiry, monitoring with
prod's PagerDuty key), so a change to prod's settings reaches these checks too. Each stack is rendered once
per mode (committed ones by the session's `plans` and `updates` fixtures, derived ones on first use, about a
second each). Both clouds' stacks are judged in update mode too, where other resources' ids and names are known
in the providers' own formats (GCP's `projects/...` names, ARM ids, Key Vault URLs: infra/plan_ids.py, checked
in test_infra_update_ids.py), so values derived from them (a key's ring, an IAM member's service account, a
node pool's cluster) are judged as a real `pulumi up` sends them."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
from azure_api_check import check_plan as azure_check
from azure_api_table import TABLE as AZURE_TABLE
from gcp_api_check import check_plan as gcp_check
from gcp_api_check import uncovered as gcp_uncovered
from infra_fixtures import Plan

from infra import config
from infra import plan as planner
from infra.azure_names import AZURE_NAME_INPUTS

ENVIRONMENTS = ("dev", "staging", "prod")
CLOUDS = {"gcp": "gcp-dev", "azure": "azure-dev"}
GCP = [f"gcp-{e}" for e in ENVIRONMENTS]
AZURE = [f"azure-{e}" for e in ENVIRONMENTS]
P = f"{planner.PROJECT}:"
# Cloud-neutral keys whose values the environment decides (the rest is the cloud's: region, machine types...).
ENVIRONMENT_KEYS = ("environment", "tags", "serving", "trainingImage", "checkpointExpiryDays", "monitoring")


@dataclass(frozen=True)
class Minimum:
    """Not vacuous: at least `checked` values judged, and fewer than checked / `unknown_share` unknown at
    preview (ids of other resources are not known before they exist)."""

    checked: int
    unknown_share: int


MINIMUM = {"gcp": Minimum(350, 8), "azure": Minimum(600, 4)}


def derived_config(cloud: str, environment: str) -> dict[str, str]:
    """`<cloud>-<environment>`'s config map: the cloud's dev stack, with the environment's settings."""
    base, env = planner.stack_config(CLOUDS[cloud]), planner.stack_config(environment)
    out = dict(base) | {P + k: env[P + k] for k in ENVIRONMENT_KEYS if P + k in env}
    cluster, env_cluster = json.loads(base[P + "cluster"]), json.loads(env[P + "cluster"])
    for pool, spec in cluster.items():
        if isinstance(spec, dict):
            spec |= {k: env_cluster[pool][k] for k in ("min", "max", "spot") if k in env_cluster[pool]}
    out[P + "cluster"] = json.dumps(cluster)
    # The amount is the environment's; the currency stays the cloud's (AWS budgets are in USD only).
    budget = json.loads(base[P + "budget"]) | {
        "monthlyAmount": json.loads(env[P + "budget"])["monthlyAmount"]
    }
    out[P + "budget"] = json.dumps(budget)
    if P + "gcpProject" in out:
        out[P + "gcpProject"] = out[P + "gcpProject"].removesuffix("-dev") + f"-{environment}"
    return out


class _Rendered(dict[str, Plan]):
    """Stack -> plan; a derived stack is rendered the first time a test asks for it."""

    def __init__(self, committed: dict[str, Plan], *, preview: bool) -> None:
        super().__init__({s: committed[s] for s in CLOUDS.values()})
        self.preview = preview

    def __missing__(self, stack: str) -> Plan:
        cloud, environment = stack.split("-", 1)
        config_map = derived_config(cloud, environment)
        cfg = config.parse(config.project_keys(config_map), stack=stack)
        self[stack] = Plan(planner.run(cfg, config_map, preview=self.preview))
        return self[stack]


@pytest.fixture(scope="module")
def cloud_plans(plans: dict[str, Plan]) -> dict[str, Plan]:
    return _Rendered(plans, preview=True)


@pytest.fixture(scope="module")
def cloud_updates(updates: dict[str, Plan]) -> dict[str, Plan]:
    """Update mode (conftest.py `updates`): the ids and computed outputs preview cannot know are known."""
    return _Rendered(updates, preview=False)


def _cloud(stack: str) -> str:
    return stack.split("-")[0]


@pytest.mark.parametrize("stack", GCP + AZURE)
def test_the_table_covers_every_resource_type_and_input_of_the_plan(
    cloud_plans: dict[str, Plan], stack: str
) -> None:
    p = cloud_plans[stack]
    problems = gcp_uncovered(p) if _cloud(stack) == "gcp" else azure_check(stack, p).uncovered
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stack", GCP + AZURE)
def test_every_value_the_plan_sends_is_one_the_cloud_api_accepts(
    cloud_plans: dict[str, Plan], stack: str
) -> None:
    check = gcp_check if _cloud(stack) == "gcp" else azure_check
    out, least = check(stack, cloud_plans[stack]), MINIMUM[_cloud(stack)]
    assert not out.violations, "\n".join(out.violations)
    assert out.checked > least.checked and out.unknown < out.checked / least.unknown_share, (
        out.checked,
        out.unknown,
    )


@pytest.mark.parametrize("stack", GCP)
def test_every_value_a_gcp_update_sends_is_one_the_gcp_api_accepts(
    cloud_updates: dict[str, Plan], stack: str
) -> None:
    """In update mode the values preview cannot know (ids of other resources, service agents' identities)
    are the provider's: nothing is skipped, and an id the API takes in full is judged by its pattern."""
    out = gcp_check(stack, cloud_updates[stack])
    assert not out.violations, "\n".join(out.violations)
    assert out.checked > 430 and out.unknown == 0, (out.checked, out.unknown)


@pytest.mark.parametrize("stack", AZURE)
def test_every_value_an_azure_update_sends_is_one_the_azure_api_accepts(
    cloud_updates: dict[str, Plan], stack: str
) -> None:
    """In update mode the ids preview cannot know are known: nothing is skipped. Names of other resources
    (a key's vault, a pool's cluster) are their `name` outputs, as the provider returns them (plan_mocks.py)."""
    out = azure_check(stack, cloud_updates[stack])
    assert not out.violations and not out.uncovered, "\n".join(out.violations + out.uncovered)
    assert out.checked > 800 and out.unknown == 0, (out.checked, out.unknown)


@pytest.mark.parametrize("stack", AZURE)
def test_an_azure_update_names_each_parent_by_the_name_it_was_given(
    cloud_updates: dict[str, Plan], stack: str
) -> None:
    """ARM returns the name a resource was given as its `name`: a key's `vaultName`, a pool's cluster, a
    subnet's network are the names their parents were created with, not Pulumi's logical names. Every path
    parameter of every Azure resource (azure_api_table) is checked against the plan's own name inputs, which
    the mock reads from azure_names.AZURE_NAME_INPUTS; a type missing there would get its logical name."""
    p = cloud_updates[stack]
    azure = [r for r in p.iter_custom() if r["type"].startswith("azure-native:")]
    assert not {r["type"] for r in azure} - set(AZURE_NAME_INPUTS), "add the type to AZURE_NAME_INPUTS"
    own = {r["urn"]: AZURE_NAME_INPUTS[r["type"]][0] for r in azure}
    given = {r["inputs"][own[r["urn"]]] for r in azure if own[r["urn"]] in r["inputs"]}
    wrong, seen = [], 0
    for r in (r for r in azure if r["type"] in AZURE_TABLE):
        assert own[r["urn"]] in AZURE_TABLE[r["type"]].path, (r["type"], own[r["urn"]])
        for key in AZURE_TABLE[r["type"]].path.keys() - {own[r["urn"]], "scope"}:
            seen += 1
            if (value := r["inputs"].get(key)) not in given:
                wrong.append(f"{r['name']}: {key} = {value!r} is no resource's given name")
    assert not wrong and seen > 50, "\n".join(wrong) or seen


STATEFUL = ("gcp:storage/bucket:Bucket", "gcp:kms/cryptoKey:CryptoKey", "azure-native:storage:StorageAccount",
            "azure-native:keyvault:Vault")  # fmt: skip


def _resource(p: Plan, name: str) -> dict[str, Any]:
    found: dict[str, Any] = p.named(f"mlp-{p['stack']}-{name}")
    return found


def test_the_derived_stacks_take_the_staging_and_prod_paths(cloud_plans: dict[str, Plan]) -> None:
    """Not vacuous: the renders are what staging and prod deploy, not dev under another name."""
    for stack in (s for s in GCP + AZURE if not s.endswith("-dev")):
        p, prod = cloud_plans[stack], stack.endswith("prod")
        assert p["environment"] == stack.split("-")[1]
        stateful = [r for r in p.iter_custom() if r["type"] in STATEFUL]
        assert stateful and all(r["protect"] is prod for r in stateful), stack
        assert p["outputs"]["serving_image"].split("@")[1].startswith("sha256:"), stack
    gcp = cloud_plans["gcp-prod"]
    assert _resource(gcp, "audit-log-bucket")["inputs"]["locked"] is True
    assert _resource(gcp, "gke")["inputs"]["deletionProtection"] is True
    assert _resource(gcp, "key-key")["inputs"]["deletionPolicy"] == "PREVENT"
    assert _resource(gcp, "gke-serving")["inputs"]["nodeConfig"]["spot"] is False
    azure = cloud_plans["azure-prod"]
    assert _resource(azure, "registry-acr")["inputs"]["zoneRedundancy"] == "Enabled"
    assert _resource(azure, "storage-data")["inputs"]["sku"]["name"] == "Standard_ZRS"
    assert _resource(azure, "aks")["inputs"]["sku"]["tier"] == "Standard"
    assert "scaleSetPriority" not in _resource(azure, "aks-serving")["inputs"]
    assert all(cloud_plans[f"{c}-prod"]["outputs"]["alerting"]["paging"] is True for c in CLOUDS)


# GKE regional pools: the provider's per-zone initial count against the pool's total limits -------------------

# A regional cluster's node pools span three of the region's zones unless `nodeLocations` names others
# (cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters#overview).
GKE_REGIONAL_ZONES = 3


@pytest.mark.parametrize("stack", GCP)
def test_a_gke_pool_starts_within_its_total_limits(cloud_plans: dict[str, Plan], stack: str) -> None:
    """`initialNodeCount` is per zone in a regional cluster (the provider's own docstring, checked below), and
    `totalMin/MaxNodeCount` are over all zones: prod's system pool (min 2, max 4) started with 2 x 3 = 6 nodes."""
    from pulumi_gcp.container import NodePoolArgs

    doc = " ".join((inspect.getdoc(NodePoolArgs.__init__) or "").split())
    assert "In regional or multi-zonal clusters, this is the number of nodes per zone." in doc
    wrong = []
    for r in cloud_plans[stack].of_type("gcp:container/nodePool:NodePool"):
        inputs = r["inputs"]
        assert "nodeLocations" not in inputs and inputs["location"] == cloud_plans[stack]["region"]
        scaling, per_zone = inputs["autoscaling"], int(inputs["initialNodeCount"])
        low, high = int(scaling["totalMinNodeCount"]), int(scaling["totalMaxNodeCount"])
        if not low <= per_zone * GKE_REGIONAL_ZONES <= high:
            wrong.append(
                f"{r['name']}: {per_zone} per zone x {GKE_REGIONAL_ZONES} zones outside {low}..{high}"
            )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("stack", GCP)
def test_the_deletion_policies_a_stack_sets_are_ones_the_provider_names(
    cloud_plans: dict[str, Plan], stack: str
) -> None:
    """`deletionPolicy` never reaches Google (gcp_api_table.PROVIDER_ONLY), so the API check skips it; the
    provider validates it against the values its docstring names ("PREVENT" is prod's, "DELETE" dev's)."""
    seen = 0
    for r in cloud_plans[stack].iter_custom():
        if "deletionPolicy" not in r["inputs"]:
            continue
        module, cls = r["type"].split(":")[1].split("/")[0], r["type"].split(":")[2]
        args = getattr(importlib.import_module(f"pulumi_gcp.{module}"), f"{cls}Args")
        doc = " ".join((inspect.getdoc(args.__init__) or "").split())
        said = doc.split(":param pulumi.Input[_builtins.str] deletion_policy:")[1].split(":param")[0]
        named = set(re.findall(r'"([A-Z]+)"', said))
        assert {"DELETE", "PREVENT", "ABANDON"} <= named, said
        assert r["inputs"]["deletionPolicy"] in named, (r["name"], r["inputs"]["deletionPolicy"], named)
        seen += 1
    assert seen >= 6, seen
