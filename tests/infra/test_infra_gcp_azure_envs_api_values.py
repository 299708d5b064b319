"""The GCP and Azure value checks (test_infra_gcp_api_values.py, test_infra_azure_api_values.py) over staging and
prod, not only the committed dev stacks: prod takes other code paths (protected and retained keys and data,
deletion protection, a locked audit log bucket, on-demand serving pools, zone-redundant Azure SKUs, other pool
sizes and budgets), and none of their values were judged.

No `Pulumi.gcp-prod.yaml` or `Pulumi.azure-prod.yaml` is committed, so the stacks are derived here: the committed
dev stack's cloud config (region, machine types, GPU type and price, network, project) with the environment's
own settings taken from the committed AWS stack of that environment (Pulumi.<env>.yaml: environment, tags,
pool sizes and spot, budget amount, digest-pinned images, checkpoint expiry, monitoring with prod's PagerDuty
key), so a change to prod's settings reaches these checks too. Rendered once per module (about a second each)."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from typing import Any

import pytest
from azure_api_check import check_plan as azure_check
from gcp_api_check import check_plan as gcp_check
from gcp_api_check import uncovered as gcp_uncovered
from infra_fixtures import Plan

from infra import config
from infra import plan as planner

ENVIRONMENTS = ("staging", "prod")
CLOUDS = {"gcp": "gcp-dev", "azure": "azure-dev"}
GCP = [f"gcp-{e}" for e in ENVIRONMENTS]
AZURE = [f"azure-{e}" for e in ENVIRONMENTS]
P = f"{planner.PROJECT}:"
# Cloud-neutral keys whose values the environment decides (the rest is the cloud's: region, machine types...).
ENVIRONMENT_KEYS = ("environment", "tags", "serving", "trainingImage", "checkpointExpiryDays", "monitoring")


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


@pytest.fixture(scope="module")
def env_plans() -> dict[str, Plan]:
    out = {}
    for cloud in CLOUDS:
        for environment in ENVIRONMENTS:
            stack, config_map = f"{cloud}-{environment}", derived_config(cloud, environment)
            cfg = config.parse(config.project_keys(config_map), stack=stack)
            out[stack] = Plan(planner.run(cfg, config_map))
    return out


STATEFUL = ("gcp:storage/bucket:Bucket", "gcp:kms/cryptoKey:CryptoKey", "azure-native:storage:StorageAccount",
            "azure-native:keyvault:Vault")  # fmt: skip


def _resource(p: Plan, name: str) -> dict[str, Any]:
    found: dict[str, Any] = p.named(f"mlp-{p['stack']}-{name}")
    return found


def test_the_derived_stacks_take_the_staging_and_prod_paths(env_plans: dict[str, Plan]) -> None:
    """Not vacuous: the renders are what staging and prod deploy, not dev under another name."""
    for stack, p in env_plans.items():
        prod = stack.endswith("prod")
        assert p["environment"] == stack.split("-")[1]
        stateful = [r for r in p.iter_custom() if r["type"] in STATEFUL]
        assert stateful and all(r["protect"] is prod for r in stateful), stack
        assert p["outputs"]["serving_image"].split("@")[1].startswith("sha256:"), stack
    gcp = env_plans["gcp-prod"]
    assert _resource(gcp, "audit-log-bucket")["inputs"]["locked"] is True
    assert _resource(gcp, "gke")["inputs"]["deletionProtection"] is True
    assert _resource(gcp, "key-key")["inputs"]["deletionPolicy"] == "PREVENT"
    assert _resource(gcp, "gke-serving")["inputs"]["nodeConfig"]["spot"] is False
    azure = env_plans["azure-prod"]
    assert _resource(azure, "registry-acr")["inputs"]["zoneRedundancy"] == "Enabled"
    assert _resource(azure, "storage-data")["inputs"]["sku"]["name"] == "Standard_ZRS"
    assert _resource(azure, "aks")["inputs"]["sku"]["tier"] == "Standard"
    assert "scaleSetPriority" not in _resource(azure, "aks-serving")["inputs"]
    assert all(env_plans[f"{c}-prod"]["outputs"]["alerting"]["paging"] is True for c in CLOUDS)


@pytest.mark.parametrize("stack", GCP)
def test_the_table_covers_every_gcp_resource_and_input_of_staging_and_prod(
    env_plans: dict[str, Plan], stack: str
) -> None:
    problems = gcp_uncovered(env_plans[stack])
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stack", GCP)
def test_every_value_staging_and_prod_send_is_one_the_google_api_accepts(
    env_plans: dict[str, Plan], stack: str
) -> None:
    out = gcp_check(stack, env_plans[stack])
    assert not out.violations, "\n".join(out.violations)
    assert out.checked > 350 and out.unknown < out.checked / 8, (out.checked, out.unknown)


@pytest.mark.parametrize("stack", AZURE)
def test_the_table_covers_every_azure_resource_and_input_of_staging_and_prod(
    env_plans: dict[str, Plan], stack: str
) -> None:
    out = azure_check(stack, env_plans[stack])
    assert not out.uncovered, "\n".join(out.uncovered)


@pytest.mark.parametrize("stack", AZURE)
def test_every_value_staging_and_prod_send_is_one_the_azure_api_accepts(
    env_plans: dict[str, Plan], stack: str
) -> None:
    out = azure_check(stack, env_plans[stack])
    assert not out.violations, "\n".join(out.violations)
    assert out.checked > 600 and out.unknown < out.checked / 4, (out.checked, out.unknown)


# GKE regional pools: the provider's per-zone initial count against the pool's total limits -------------------

# A regional cluster's node pools span three of the region's zones unless `nodeLocations` names others
# (cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters#overview).
GKE_REGIONAL_ZONES = 3


@pytest.mark.parametrize("stack", GCP)
def test_a_gke_pool_starts_within_its_total_limits(env_plans: dict[str, Plan], stack: str) -> None:
    """`initialNodeCount` is per zone in a regional cluster (the provider's own docstring, checked below), and
    `totalMin/MaxNodeCount` are over all zones: prod's system pool (min 2, max 4) started with 2 x 3 = 6 nodes."""
    from pulumi_gcp.container import NodePoolArgs

    doc = " ".join((inspect.getdoc(NodePoolArgs.__init__) or "").split())
    assert "In regional or multi-zonal clusters, this is the number of nodes per zone." in doc
    wrong = []
    for r in env_plans[stack].of_type("gcp:container/nodePool:NodePool"):
        inputs = r["inputs"]
        assert "nodeLocations" not in inputs and inputs["location"] == env_plans[stack]["region"]
        scaling, per_zone = inputs["autoscaling"], int(inputs["initialNodeCount"])
        low, high = int(scaling["totalMinNodeCount"]), int(scaling["totalMaxNodeCount"])
        if not low <= per_zone * GKE_REGIONAL_ZONES <= high:
            wrong.append(
                f"{r['name']}: {per_zone} per zone x {GKE_REGIONAL_ZONES} zones outside {low}..{high}"
            )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("stack", GCP)
def test_the_deletion_policies_prod_sets_are_ones_the_provider_names(
    env_plans: dict[str, Plan], stack: str
) -> None:
    """`deletionPolicy` never reaches Google (gcp_api_table.PROVIDER_ONLY), so the API check skips it; the
    provider validates it against the values its docstring names ("PREVENT" is prod's, "DELETE" dev's)."""
    seen = 0
    for r in env_plans[stack].iter_custom():
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
