"""Prod differs from dev where it must: protection, no force_destroy, on-demand serving, digests."""

from __future__ import annotations

from infra_fixtures import Plan

PROTECTED = (
    "aws:kms/key:Key",
    "aws:s3/bucket:Bucket",
    "aws:ecr/repository:Repository",
    "aws:eks/cluster:Cluster",
)


def test_prod_protects_stateful_resources_and_dev_does_not(plans: dict[str, Plan]) -> None:
    for token in PROTECTED:
        assert all(r["protect"] for r in plans["prod"].of_type(token)), token
        assert not any(r["protect"] for r in plans["dev"].of_type(token)), token
    assert not any(r["inputs"]["forceDestroy"] for r in plans["prod"].of_type("aws:s3/bucket:Bucket"))
    assert not any(r["inputs"]["forceDelete"] for r in plans["prod"].of_type("aws:ecr/repository:Repository"))
    assert plans["prod"].one("aws:eks/cluster:Cluster")["inputs"]["deletionProtection"] is True


def test_prod_images_are_pinned_by_digest(plans: dict[str, Plan]) -> None:
    out = plans["prod"]["outputs"]
    for key in ("serving_image", "training_image"):
        repo, digest = out[key].split("@")
        assert digest.startswith("sha256:") and len(digest) == 71
        assert repo == out["image_repositories"][key.split("_")[0]]
