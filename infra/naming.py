"""Names and tags: one place decides how resources are called and labelled on every cloud."""

from __future__ import annotations

import re

from infra.config import ConfigError, PlatformConfig, limits


def global_name(cfg: PlatformConfig, purpose: str, *, max_len: int = 63) -> str:
    """Globally unique, DNS-safe name (S3/GCS buckets): `<org>-mlp-<stack>-<purpose>`.

    Deterministic on purpose: a real preview then knows bucket ARNs, so IAM documents are known too.
    """
    name = f"{cfg.org}-mlp-{cfg.stack}-{purpose}"
    if len(name) > max_len:
        raise ValueError(f"name {name!r} is longer than {max_len}: shorten org or the stack name")
    return name


def compact_name(cfg: PlatformConfig, purpose: str) -> str:
    """Alphanumeric global name (Azure storage accounts, registries, key vaults): `<org>mlp<stack><purpose>`.
    Org and stack are the free parts: a name over its bound is refused when the config is read
    (config/checks.py calls this for every purpose), not by ARM after half the stack exists."""
    what, bound = limits.AZURE_COMPACT_NAMES[purpose]
    name = re.sub(r"[^a-z0-9]", "", f"{cfg.org}mlp{cfg.stack}{purpose}".lower())
    if not bound.admits(len(name)):
        raise ConfigError(
            "org", cfg.org,
            f"the {what} name {name!r} would have {len(name)} characters; Azure takes {bound.describe()}: "
            f"use an org or stack name {len(name) - (bound.maximum or len(name))} characters shorter",
        )  # fmt: skip
    return name


def role_name(cfg: PlatformConfig, purpose: str) -> str:
    """An AWS IAM role name, `mlp-<stack>-<purpose>`: the stack name is the only free part, so a long one is
    refused here, at preview, instead of by CreateRole at `pulumi up` after half the stack exists."""
    name = f"{cfg.name}-{purpose}"
    pattern, length = limits.iam_role_name()
    if not (length.admits(len(name)) and re.fullmatch(pattern, name)):
        room = (length.maximum or len(name)) - len(name) + len(cfg.stack)
        raise ConfigError(
            "stack", cfg.stack,
            f"IAM role name {name!r} has {len(name)} characters; IAM takes {length.describe()} "
            f"matching {pattern}: use a stack name of at most {room} characters",
        )  # fmt: skip
    return name


def tags(cfg: PlatformConfig, **extra: str) -> dict[str, str]:
    """The required tags (AWS tags, Azure tags, GCP labels: all share the stricter GCP syntax)."""
    return {**cfg.tags, "stack": cfg.stack, "managed-by": "pulumi", **extra}
