"""Issue 11 checks that the per-cloud files did not cover: the cluster-autoscaler table for every cloud that
runs the chart, spot draining per cloud, each cloud bound's source in its refusal, every resource option in
the plan JSON (aliases included), and prod protection on GCP and Azure (only committed as dev stacks).
Expected values are literals from the providers' documentation, not the program's own tables."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from infra_fixtures import STACKS, Plan

from infra import config
from infra import plan as planner
from infra.config import ConfigError

DIGEST = "sha256:" + "0" * 64


# --- cluster-autoscaler: one table, the cluster's minor, only where the chart runs -----------------------
# kubernetes/autoscaler cluster-autoscaler/README.md "Releases": the first chart of each autoscaler minor.
FIRST_CHART_OF_MINOR = {"1.31": (9, 38, 0), "1.32": (9, 45, 0), "1.33": (9, 47, 0), "1.34": (9, 51, 0)}


def test_the_autoscaler_table_pins_each_minor_to_its_own_release() -> None:
    from infra.k8s.versions import CLUSTER_AUTOSCALER

    assert set(CLUSTER_AUTOSCALER) == set(FIRST_CHART_OF_MINOR)
    for minor, release in CLUSTER_AUTOSCALER.items():
        assert release.image_tag.startswith(f"v{minor}."), (minor, release)
        chart = tuple(int(x) for x in release.chart.split("."))
        later = [m for m in FIRST_CHART_OF_MINOR if m > minor]
        assert chart >= FIRST_CHART_OF_MINOR[minor], (minor, release.chart)
        if later:  # and older than the next minor's first chart (which targets the next minor)
            assert chart < FIRST_CHART_OF_MINOR[min(later)], (minor, release.chart)


@pytest.mark.parametrize("stack", STACKS)
def test_the_autoscaler_chart_runs_where_the_cloud_has_none_and_matches_the_minor(
    plans: dict[str, Plan], stack: str
) -> None:
    p = plans[stack]
    charts = {r["inputs"]["name"]: r["inputs"] for r in p.of_type("kubernetes:helm.sh/v3:Release")}
    if p["cloud"] == "aws":
        # Kubernetes 1.33 in every committed AWS stack -> the 1.33 autoscaler.
        assert charts["cluster-autoscaler"]["version"] == "9.47.0"
        assert charts["cluster-autoscaler"]["values"]["image"]["tag"] == "v1.33.5"
    else:
        # GKE's and AKS's autoscalers are part of the managed control plane (same minor by construction).
        assert "cluster-autoscaler" not in charts


def test_a_minor_without_an_autoscaler_release_is_refused_on_aws_only() -> None:
    from test_infra_config import mutate

    with pytest.raises(ConfigError, match="infra/k8s/versions.py"):
        config.parse(mutate("cluster.kubernetesVersion", "1.30"), stack="dev")
    for stack in ("gcp-dev", "azure-dev"):
        cfg = config.parse(mutate("cluster.kubernetesVersion", "1.30", stack), stack=stack)
        assert cfg.cluster.kubernetes_version == "1.30"


# --- spot eviction drains the GPU pool on every cloud ------------------------------------------------------
@pytest.mark.parametrize("stack", STACKS)
def test_spot_nodes_are_drained_on_eviction(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    charts = {r["inputs"]["name"]: r["inputs"] for r in p.of_type("kubernetes:helm.sh/v3:Release")}
    drain = p["outputs"]["gpu_pool"]["spot_drain"]
    if p["cloud"] == "aws":
        # EC2 gives a 2-minute notice that nothing in EKS acts on: the handler cordons and drains.
        nth = charts["aws-node-termination-handler"]["values"]
        assert nth["enableSpotInterruptionDraining"] is True
        assert nth["nodeSelector"] == {"eks.amazonaws.com/capacityType": "SPOT"}
        assert drain.startswith("aws-node-termination-handler")
    else:
        # AKS node auto-drain acts on the Preempt scheduled event; GKE's graceful node shutdown on Spot
        # preemption: installing a handler there would be a second drainer.
        assert "aws-node-termination-handler" not in charts
        assert drain.startswith(
            {"azure": "AKS node auto-drain (Preempt", "gcp": "GKE graceful node shutdown"}[p["cloud"]]
        )


def test_azure_gpu_pool_is_deleted_not_deallocated_on_eviction(plans: dict[str, Plan]) -> None:
    gpu = plans["azure-dev"].one("azure-native:containerservice:AgentPool", "-gpu")["inputs"]
    # Deallocated spot VMs keep their quota and are never drained again: Delete lets auto-drain finish.
    assert (gpu["scaleSetPriority"], gpu["scaleSetEvictionPolicy"]) == ("Spot", "Delete")


# --- refusals name the bound and where it is defined -------------------------------------------------------
CLOUD_BOUNDS = [
    ("KMS rotation", "dev", "keyRotationDays", 60, ">= 90", "botocore kms model, RotationPeriodInDaysType"),
    (
        "CloudWatch retention",
        "dev",
        "auditRetentionDays",
        700,
        "[365, 400, 545, 731,",
        "botocore logs model, Days",
    ),
    (
        "Log Analytics retention",
        "azure-dev",
        "auditRetentionDays",
        731,
        "<= 730",
        "data-retention-configure, PerGB2018",
    ),
    (
        "Azure budget notifications",
        "azure-dev",
        "budget.alertThresholds",
        [20, 40, 60, 80, 100],
        "<= 5",
        "Budget can have up to five notifications",
    ),
    (
        "AWS budget notifications",
        "dev",
        "budget.alertThresholds",
        list(range(10, 110, 10)),
        "<= 10",
        "botocore budgets model, CreateBudget.NotificationsWithSubscribers",
    ),
    (
        "VPC on the GKE pod range",
        "gcp-dev",
        "network.cidr",
        "10.130.0.0/16",
        "10.128.0.0/14",
        "GKE pod range",
    ),
    (
        "GKE machine types",
        "gcp-dev",
        "cluster.servingPool.machineTypes",
        ["c3-standard-8", "n2-standard-8"],
        "list one",
        "cloud.google.com/kubernetes-engine/docs/concepts/node-pools",
    ),
    (
        "AKS machine types",
        "azure-dev",
        "cluster.gpuPool.machineTypes",
        ["Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"],
        "list one",
        "learn.microsoft.com/azure/aks/create-node-pools",
    ),
    ("gcpProject on AWS", "dev", "gcpProject", "acme-ml", "only gcp stacks", "remove it"),
    ("serving.cpu", "dev", "serving.cpu", "2 cores", "such as 2, 500m or 4Gi", "apimachinery"),
]


@pytest.mark.parametrize(
    ("stack", "path", "value", "bound", "source"),
    [b[1:] for b in CLOUD_BOUNDS],
    ids=[b[0] for b in CLOUD_BOUNDS],
)
def test_each_cloud_refusal_names_its_bound_and_source(
    stack: str, path: str, value: Any, bound: str, source: str
) -> None:
    from test_infra_config import mutate

    with pytest.raises(ConfigError) as err:
        config.parse(mutate(path, value, stack), stack=stack)
    assert err.value.key == path
    assert bound in str(err.value) and source in str(err.value), str(err.value)


# --- the plan JSON carries every option the engine acts on ------------------------------------------------
def test_every_resource_option_is_recorded_in_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    import pulumi
    import pulumi_aws as aws

    def build(cfg: Any) -> dict[str, Any]:
        aws.s3.Bucket(
            "kept",
            bucket="kept-name",
            opts=pulumi.ResourceOptions(
                protect=True,
                retain_on_delete=True,
                ignore_changes=["tags"],
                delete_before_replace=True,
                aliases=[pulumi.Alias(name="old-name")],
            ),
        )
        aws.s3.Bucket("plain")
        return {}

    monkeypatch.setattr("infra.program.build", build)
    doc = planner.run(planner.load_stack("dev"), planner.stack_config("dev"))
    kept, plain = (next(r for r in doc["resources"] if r["name"] == n) for n in ("kept", "plain"))
    assert (kept["protect"], kept["retainOnDelete"], kept["deleteBeforeReplace"]) == (True, True, True)
    assert kept["ignoreChanges"] == ["tags"]
    # The program's alias as the engine gets it (the SDK adds its own: S3 Bucket's former type name).
    assert {"spec": {"name": "old-name", "parentUrn": ""}} in kept["aliases"]
    assert {"spec": {"type": "aws:s3/bucketV2:BucketV2", "parentUrn": ""}} in plain["aliases"]
    assert (plain["protect"], plain["retainOnDelete"], plain["deleteBeforeReplace"]) == (False, False, False)
    assert plain["ignoreChanges"] == [] and "old-name" not in str(plain["aliases"])


# --- GCP and Azure commit no prod stack: a prod variant of their dev stacks (test_infra_prod.py judges it) -----
def prod_variant(stack: str) -> config.PlatformConfig:
    from test_infra_config import raw

    values = copy.deepcopy(raw(stack))
    values["environment"] = "prod"
    values["tags"]["environment"] = "prod"
    values["serving"].update(image=DIGEST, minReplicas=2)
    values["trainingImage"] = DIGEST
    values["monitoring"] = {"alertmanagerImage": f"quay.io/prometheus/alertmanager:v0.28.1@{DIGEST}"}
    values["cluster"]["servingPool"]["spot"] = False
    values["cluster"]["servingPool"]["min"] = 2
    return config.parse(values, stack=f"{stack.split('-')[0][:3]}prd")
