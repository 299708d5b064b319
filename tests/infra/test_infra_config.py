"""Config validation: every committed stack parses, accepted inputs keep their values; each kind of bad input
stops with the key named (the table: test_infra_config_refused.py). `raw`, `mutate` and `parse` are shared with
the other config tests."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from infra import config, plan
from infra.config import ConfigError


def raw(stack: str = "dev") -> dict[str, Any]:
    """A stack's config as structured values (what the YAML holds), without the project prefix."""
    import yaml

    document = yaml.safe_load((plan.ROOT / f"Pulumi.{stack}.yaml").read_text())
    # `secure:` values as a program sees them offline (decrypted by the CLI in a real run).
    return config.project_keys(plan.unknown_secrets(document["config"]))


def parse(values: dict[str, Any], stack: str = "dev") -> config.PlatformConfig:
    return config.parse(values, stack=stack)


@pytest.mark.parametrize("stack", ["dev", "staging", "prod", "gcp-dev", "azure-dev"])
def test_committed_stacks_parse(stack: str) -> None:
    cfg = plan.load_stack(stack)
    assert cfg.stack == stack
    assert cfg.region in config.EU_REGIONS[cfg.cloud]
    assert set(config.REQUIRED_TAGS) <= set(cfg.tags)
    assert cfg.cluster.gpu_pool.spot and cfg.cluster.gpu_pool.min_nodes == 0


def test_committed_stacks_cover_three_clouds_and_all_environments() -> None:
    cfgs = [plan.load_stack(s) for s in plan.committed_stacks()]
    assert {c.cloud for c in cfgs} == {"aws", "gcp", "azure"}
    assert {c.environment for c in cfgs if c.cloud == "aws"} == {"dev", "staging", "prod"}


def test_string_values_as_pulumi_passes_them_parse_like_structured_ones() -> None:
    structured = parse(raw())
    as_strings = parse(config.project_keys(plan.stack_config("dev")))
    assert structured == as_strings


def test_parsed_config_is_frozen() -> None:
    from pydantic import ValidationError

    cfg = parse(raw())
    with pytest.raises(ValidationError, match="frozen"):
        cfg.region = "us-east-1"  # type: ignore[misc]


def test_region_defaults_to_spain_per_cloud() -> None:
    for stack, expected in (
        ("dev", "eu-south-2"),
        ("gcp-dev", "europe-southwest1"),
        ("azure-dev", "spaincentral"),
    ):
        values = raw(stack)
        del values["region"]
        assert parse(values, stack).region == expected


def mutate(path: str, value: Any, stack: str = "dev") -> dict[str, Any]:
    values = copy.deepcopy(raw(stack))
    *parents, leaf = path.split(".")
    node = values
    for p in parents:
        node = node[p]
    if value is DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return values


# `mutate(path, DELETE)` removes the key (test_infra_config_refused.py: a required key left out).
DELETE = object()


def test_gpu_budget_message_says_how_far_to_lower() -> None:
    with pytest.raises(ConfigError) as err:
        parse(mutate("cluster.gpuPool.max", 20))
    # 2000 USD / (0.6 USD/h * 730 h) = 4.5 -> at most 4 nodes.
    assert "lower it to <= 4" in str(err.value)


def test_open_api_is_allowed_in_dev_only() -> None:
    assert parse(mutate("network.apiAllowedCidrs", ["0.0.0.0/0"])).network.api_allowed_cidrs == ("0.0.0.0/0",)


def test_zero_is_kept_not_replaced_by_a_default() -> None:
    values = mutate("serving.minReplicas", 0)
    values["serving"]["scaleToZero"] = True
    assert parse(values).serving.min_replicas == 0


def test_load_reads_the_running_stack_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """`load()` is what `pulumi up` uses: config from the runtime (PULUMI_CONFIG), stack from settings."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(plan.stack_config("gcp-dev")))
    monkeypatch.setattr(pulumi, "get_stack", lambda: "gcp-dev")
    monkeypatch.setattr(pulumi, "get_project", lambda: "eu-ml-platform")
    token = runtime_config.CONFIG.set({})
    try:
        cfg = config.load()
    finally:
        runtime_config.CONFIG.reset(token)
    assert (cfg.cloud, cfg.stack, cfg.gcp_project) == ("gcp", "gcp-dev", "acme-ml-platform-dev")


def test_tags_cannot_be_changed_after_parsing() -> None:
    cfg = parse(raw())
    with pytest.raises(TypeError):
        cfg.tags["owner"] = "someone-else"  # type: ignore[index]


def test_aws_bounds_are_read_from_botocore_not_repeated() -> None:
    """The values AWS documents today (KMS EnableKeyRotation, Logs PutRetentionPolicy, CreateBudget)."""
    from infra.config import limits

    assert (limits.kms_rotation_days().minimum, limits.kms_rotation_days().maximum) == (90, 2560)
    assert limits.cloudwatch_retention_days() == (
        *(1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731),
        *(1096, 1827, 2192, 2557, 2922, 3288, 3653),
    )
    assert limits.aws_budget_notifications().maximum == 10


def test_a_botocore_change_changes_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.config import limits

    monkeypatch.setattr(
        limits, "kms_rotation_days", lambda: limits.Bound(30, 2560, "botocore kms model, test")
    )
    assert parse(mutate("keyRotationDays", 30)).key_rotation_days == 30


def test_admin_and_deployer_must_differ() -> None:
    values = mutate("aws.deployerRole", "mlp-platform-admin")
    with pytest.raises(ConfigError, match="one access entry per principal") as err:
        parse(values)
    assert err.value.key == "aws.deployerRole"


def test_role_paths_are_accepted() -> None:
    cfg = parse(mutate("aws.adminRole", "aws-reserved/sso.amazonaws.com/eu-west-1/AWSReservedSSO_Admin_0123"))
    assert cfg.aws is not None and cfg.aws.admin_role.endswith("AWSReservedSSO_Admin_0123")


@pytest.mark.parametrize("quantity", ["2", "500m", "1.5", "4Gi", "512Mi", "1e3"])
def test_kubernetes_quantities_are_accepted(quantity: str) -> None:
    assert parse(mutate("serving.cpu", quantity)).serving.cpu == quantity
