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
# cloud's definition (not the program's table): an AWS resource 50 (botocore eks TagMap; EC2's tag restrictions),
# and each node's EC2 instance gets the launch template's tags plus 5 that EKS's Auto Scaling group propagates
# (eks:cluster-name, eks:nodegroup-name, kubernetes.io/cluster/<name>, k8s.io/cluster-autoscaler/enabled and
# /<name>); an Azure resource 50 (storage accounts too, whatever their REST spec's old "15" says); a GCP resource
# 64 labels, one of them pulumi-gcp's goog-pulumi-provisioned.
MOST_TAGS = {"aws": 50, "azure": 50, "gcp": 64}
SOURCE = {
    "aws": "botocore eks model, TagMap",
    "azure": "tag-resources#limitations",
    "gcp": "labels-overview#requirements",
}
# Tag keys each resource gets beyond the stack's own: `stack`, `managed-by`, one of purpose/pool/image/identity.
PLATFORM = 3
EXTRA = {"aws": 5, "azure": 0, "gcp": 1}  # EKS's propagated ASG tags; goog-pulumi-provisioned


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
    if cloud == "aws":  # the instances' tags: the launch templates' `instance` tag specifications
        counts = [
            len(spec["tags"])
            for r in p.of_type("aws:ec2/launchTemplate:LaunchTemplate")
            for spec in r["inputs"]["tagSpecifications"]
            if spec["resourceType"] == "instance"
        ]
    else:
        carrier, key = {
            "azure": ("azure-native:storage:StorageAccount", "tags"),
            "gcp": ("gcp:storage/bucket:Bucket", "labels"),
        }[cloud]
        counts = [len(r["inputs"][key]) for r in p.of_type(carrier)]
    added = EXTRA[cloud]  # by EKS or pulumi-gcp, after the plan
    stack_tags = planner.load_stack(DEV[cloud]).tags
    assert max(counts) + added == len(stack_tags) + PLATFORM + EXTRA[cloud], counts
    everywhere = [len(v) for r in p.iter_custom() for k, v in r["inputs"].items() if k.endswith(("tags", "abels"))
                  and isinstance(v, dict)]  # fmt: skip
    # No resource of the plan ends up with more than the carrier (the node group's 2 autoscaler discovery tags
    # are fewer than the 5 EKS adds to each instance; pulumi-gcp adds its label to every resource).
    provider = EXTRA["gcp"] if cloud == "gcp" else 0
    assert max(everywhere) + provider <= max(counts) + added
