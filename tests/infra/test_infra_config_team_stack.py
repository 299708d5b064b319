"""A team's own stack copied from a committed one (a Spanish team's `prod-es`): names, machine types and regions it
may change, each refused at preview with the cloud's own definition when the cloud would refuse it at `pulumi up`,
and accepted when the cloud accepts it."""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest
from test_infra_config import mutate, parse, raw

from infra.config import ConfigError


def _ec2_instance_types() -> list[str]:
    return list(botocore.session.get_session().get_service_model("ec2").shape_for("InstanceType").enum)


# ECR's RepositoryName pattern (botocore) and S3's bucket naming rules are lowercase only: `mlp-Prod-ES/serving`
# and `acme-mlp-Prod-ES-raw` fail CreateRepository/CreateBucket halfway through the first `up`.
@pytest.mark.parametrize("stack", ["Prod-ES", "prodES"])
def test_aws_stack_name_with_capitals_is_refused_with_the_ecr_and_s3_rules(stack: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse(raw("prod"), stack)
    assert err.value.key == "stack"
    message = str(err.value)
    assert "lowercase" in message
    assert "RepositoryName" in message and "botocore ecr model" in message
    assert "bucketnamingrules" in message


def test_aws_stack_name_too_long_for_a_bucket_is_a_config_error_with_the_bound() -> None:
    # 10 + len("-mlp-") + 38 + len("-checkpoints") = 65 > 63; the IAM role names (64) still fit.
    stack = "prod-es-madrid-data-science-team-x1234"
    with pytest.raises(ConfigError) as err:
        parse(mutate("org", "acmeiberia", "prod"), stack)
    assert err.value.key == "stack"
    message = str(err.value)
    assert "acmeiberia-mlp-prod-es-madrid-data-science-team-x1234-checkpoints" in message
    assert "<= 63" in message and "bucketnamingrules" in message
    assert "at most 36 characters" in message
    assert parse(mutate("org", "acmeiberia", "prod"), stack[:36]).stack == stack[:36]


@pytest.mark.parametrize("types", [["g5.xlargee"], ["G5.xlarge"], ["g5.xlarge", "g6.xlarge", "g4dn.xl"]])
def test_an_instance_type_ec2_does_not_know_is_refused(types: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        parse(mutate("cluster.gpuPool.machineTypes", types, "prod"), "prod")
    assert err.value.key == "cluster.gpuPool.machineTypes"
    message = str(err.value)
    assert "botocore ec2 model, InstanceType" in message
    assert repr(next(t for t in types if t not in _ec2_instance_types())) in message


@pytest.mark.parametrize(
    ("key", "types"),
    [
        ("cluster.gpuPool", {"machineTypes": ["g6e.xlarge", "g6.2xlarge", "g5.2xlarge"], "hourlyPrice": 1.2}),
        (
            "cluster.gpuPool",
            {"machineTypes": ["p4d.24xlarge"], "gpusPerNode": 8, "hourlyPrice": 12, "max": 1},
        ),
        ("cluster.servingPool", {"machineTypes": ["c7i.4xlarge", "m7i.4xlarge", "c6a.4xlarge"]}),
    ],
)
def test_real_instance_types_are_accepted(key: str, types: dict[str, Any]) -> None:
    values = mutate(key, {**raw("prod")["cluster"][key.split(".")[1]], **types}, "prod")
    values["budget"]["monthlyAmount"] = 20000
    pool = parse(values, "prod").cluster.model_dump(by_alias=True)[key.split(".")[1]]
    assert list(pool["machineTypes"]) == types["machineTypes"]


def test_more_instance_types_than_an_eks_node_group_takes_are_refused() -> None:
    many = [t for t in _ec2_instance_types() if t.startswith(("c6i.", "c7i.", "m6i.", "m7i."))][:21]
    assert len(many) == 21
    with pytest.raises(ConfigError) as err:
        parse(mutate("cluster.servingPool.machineTypes", many, "prod"), "prod")
    assert err.value.key == "cluster.servingPool.machineTypes"
    assert "<= 20" in str(err.value) and "CreateNodegroup" in str(err.value)
    assert parse(mutate("cluster.servingPool.machineTypes", many[:20], "prod"), "prod")


# Microsoft's region list (learn.microsoft.com/azure/reliability/regions-list): Austria East (Vienna) and Belgium
# Central (Brussels) are public regions in EU member states; the UK, Switzerland and Norway stay outside.
@pytest.mark.parametrize("region", ["austriaeast", "belgiumcentral"])
def test_eu_azure_regions_are_accepted(region: str) -> None:
    assert parse(mutate("region", region, "azure-dev"), "azure-dev").region == region


@pytest.mark.parametrize("region", ["uksouth", "switzerlandnorth", "norwayeast"])
def test_european_azure_regions_outside_the_eu_stay_refused(region: str) -> None:
    with pytest.raises(ConfigError, match="not an EU region"):
        parse(mutate("region", region, "azure-dev"), "azure-dev")


def test_gcp_and_azure_keep_their_own_machine_type_names() -> None:
    """The EC2 list is AWS's: GKE's and AKS's machine types are not judged by it."""
    assert parse(raw("gcp-dev"), "gcp-dev").cluster.gpu_pool.machine_types == ("g2-standard-8",)
    assert parse(raw("azure-dev"), "azure-dev").cluster.gpu_pool.machine_types == ("Standard_NC4as_T4_v3",)
