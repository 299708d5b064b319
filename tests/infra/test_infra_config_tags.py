"""How many `tags` a stack may set: each cloud bounds the tags (GCP: labels) of one resource, and the platform
and the provider add their own to what the stack sets. Refused when the config is read, on every stack, not
by the cloud's API halfway through `pulumi up` (the plan checks see only the committed stacks)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra_fixtures import Plan

from infra import config
from infra import plan as planner
from infra.config import ConfigError

DEV = {"aws": "dev", "gcp": "gcp-dev", "azure": "azure-dev"}
# What each cloud takes on the resource of this platform that carries the most tags, literally from the
# cloud's definition (not the program's table): EKS CreateNodegroup `tags` (botocore eks TagMap, max 50; the
# serving node group gets the cluster-autoscaler's two discovery tags too), an Azure storage account
# (Microsoft.Storage StorageAccountCreateParameters.tags: "A maximum of 15 tags"; other Azure resources take
# 50), a GCP resource (64 labels, one of them pulumi-gcp's goog-pulumi-provisioned).
MOST_TAGS = {"aws": 50, "azure": 15, "gcp": 64}
SOURCE = {
    "aws": "botocore eks model, TagMap",
    "azure": "StorageAccountCreateParameters.tags",
    "gcp": "labels-overview#requirements",
}
# Tag keys each resource gets beyond the stack's own: `stack`, `managed-by`, one of purpose/pool/image/identity.
PLATFORM = 3
EXTRA = {"aws": 2, "azure": 0, "gcp": 1}  # autoscaler discovery tags; goog-pulumi-provisioned


def values_with_tags(cloud: str, count: int) -> dict[str, Any]:
    """The dev stack's config with `count` tags in all (the required ones and made-up ones)."""
    values = config.project_keys(planner.stack_config(DEV[cloud]))
    tags = json.loads(values["tags"])
    tags |= {f"extra-{i}": "x" for i in range(count - len(tags))}
    values["tags"] = tags
    return values


@pytest.mark.parametrize("cloud", sorted(MOST_TAGS))
def test_the_most_tags_a_cloud_takes_pass_and_one_more_is_refused_with_its_source(cloud: str) -> None:
    room = MOST_TAGS[cloud] - PLATFORM - EXTRA[cloud]
    cfg = config.parse(values_with_tags(cloud, room), stack=DEV[cloud])
    assert len(cfg.tags) == room
    with pytest.raises(ConfigError) as err:
        config.parse(values_with_tags(cloud, room + 1), stack=DEV[cloud])
    message = str(err.value)
    assert err.value.key == "tags"
    assert f"{room + 1} tags" in message and f"<= {MOST_TAGS[cloud]}" in message, message
    assert SOURCE[cloud] in message and "remove 1" in message, message


@pytest.mark.parametrize("cloud", sorted(MOST_TAGS))
def test_the_count_the_config_judges_is_what_the_most_tagged_resource_of_the_plan_gets(
    plans: dict[str, Plan], cloud: str
) -> None:
    """Not a guess: the plan's most-tagged resource (where the cloud's bound is the one above) carries exactly
    the stack's tags + the platform's + the extras counted above."""
    p = plans[DEV[cloud]]
    carrier = {
        "aws": "aws:eks/nodeGroup:NodeGroup",
        "azure": "azure-native:storage:StorageAccount",
        "gcp": "gcp:storage/bucket:Bucket",
    }[cloud]
    key = "labels" if cloud == "gcp" else "tags"
    counts = [len(r["inputs"][key]) for r in p.of_type(carrier)]
    provider = EXTRA[cloud] if cloud == "gcp" else 0  # added by pulumi-gcp, not in the plan
    stack_tags = planner.load_stack(DEV[cloud]).tags
    assert max(counts) + provider == len(stack_tags) + PLATFORM + EXTRA[cloud], counts
    everywhere = [len(v) for r in p.iter_custom() for k, v in r["inputs"].items() if k.endswith(("tags", "abels"))
                  and isinstance(v, dict)]  # fmt: skip
    assert max(everywhere) == max(counts)
