"""AWS rules on what a team changes in its own copy of a stack: the stack name (in bucket and repository names) and
the node pools' instance types. Each bound is read from botocore or cites AWS's rule (`limits.py`), so a value AWS
refuses stops the preview instead of CreateBucket, CreateRepository or CreateNodegroup halfway through an `up`."""

from __future__ import annotations

import re

from infra.config import limits
from infra.config.errors import ConfigError
from infra.config.model import PlatformConfig


def check_aws(cfg: PlatformConfig) -> None:
    if cfg.cloud == "aws":
        _stack_in_names(cfg)
        _instance_types(cfg)


def _stack_in_names(cfg: PlatformConfig) -> None:
    """Buckets are `<org>-mlp-<stack>-<purpose>` (infra/naming.py global_name), ECR repositories
    `mlp-<stack>/<image>` (infra/aws/registry.py); Pulumi stack names may hold capitals and `_`, neither takes."""
    from infra.shape import BUCKETS, IMAGES  # infra.shape imports pulumi: only when an AWS stack is read

    bucket = limits.S3_BUCKET_NAME
    ecr_pattern, ecr_length = limits.ecr_repository_name()
    buckets = [f"{cfg.org}-mlp-{cfg.stack}-{purpose}" for purpose in BUCKETS]
    repositories = [f"{cfg.name}/{image}" for image in IMAGES]
    bad_buckets = [b for b in buckets if not re.fullmatch(limits.S3_BUCKET_NAME_PATTERN, b) or ".." in b]
    bad_repositories = [
        r for r in repositories if not (re.fullmatch(ecr_pattern, r) and ecr_length.admits(len(r)))
    ]
    if bad_buckets or bad_repositories:
        shown = [*bad_buckets[:1], *bad_repositories[:1]]
        raise ConfigError(
            "stack", cfg.stack,
            f"it makes names such as {' and '.join(map(repr, shown))}: S3 bucket names are lowercase letters, "
            f"digits, '.' and '-' ({bucket.source}) and ECR repository names match {ecr_pattern} "
            f"({ecr_length.source}): use a lowercase stack name of letters, digits and hyphens (`pulumi stack init prod-es`)",
        )  # fmt: skip
    longest = max(buckets, key=len)
    if not bucket.admits(len(longest)):
        room = (bucket.maximum or 0) - len(longest) + len(cfg.stack)
        raise ConfigError(
            "stack", cfg.stack,
            f"the bucket name {longest!r} has {len(longest)} characters; S3 takes {bucket.describe()}: use a "
            f"stack name of at most {room} characters (or a shorter org)",
        )  # fmt: skip


def _instance_types(cfg: PlatformConfig) -> None:
    known, per_group = limits.ec2_instance_types(), limits.eks_nodegroup_instance_types()
    pools = cfg.cluster.model_dump(by_alias=True)
    for key in ("systemPool", "servingPool", "gpuPool"):
        types = list(pools[key]["machineTypes"])
        if not per_group.admits(len(types)):
            raise ConfigError(
                f"cluster.{key}.machineTypes", types,
                f"{len(types)} instance types; an EKS managed node group takes {per_group.describe()}: "
                f"list at most {per_group.maximum}",
            )  # fmt: skip
        unknown = [t for t in types if t not in known]
        if unknown:
            close = sorted(t for t in known if t.split(".")[0] == unknown[0].lower().split(".")[0])[:8]
            raise ConfigError(
                f"cluster.{key}.machineTypes", unknown[0],
                f"not an EC2 instance type ({limits.EC2_INSTANCE_TYPE_SOURCE}; a type newer than the installed "
                "botocore needs a botocore upgrade)"
                + (f"; the family's types include {', '.join(close)}" if close else ""),
            )  # fmt: skip
