"""The stack configuration: read once into a frozen, typed object and validated before any resource exists.

`parse(raw, stack=...)` is pure (a mapping of `key -> value` without the `eu-ml-platform:` prefix, values as
Pulumi hands them to a program: strings, with objects and lists JSON-encoded). `load()` reads the running
stack's config through the Pulumi runtime and calls `parse`. Nothing else in `infra/` reads Pulumi config.

    model.py   the typed fields, their defaults and single-field bounds (pydantic)
    checks.py  rules across fields and clouds
    limits.py  what each cloud accepts and where that is defined (botocore models, cloud documentation)
    errors.py  ConfigError: `<key>: <value> is not allowed; <what is allowed and its source>`, e.g.
               region: 'us-east-1' is not allowed; not an EU region for aws; allowed: eu-central-1, ...
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from infra.config.checks import check
from infra.config.errors import ConfigError, from_validation_error
from infra.config.model import (
    CLOUDS,
    DATA_CLASSIFICATIONS,
    DEFAULT_REGION,
    ENVIRONMENTS,
    EU_REGIONS,
    HOURS_PER_MONTH,
    MAX_ROTATION_DAYS,
    MIN_AUDIT_RETENTION_DAYS,
    OPEN_CIDRS,
    PROJECT,
    REQUIRED_TAGS,
    AwsConfig,
    AzureConfig,
    BudgetConfig,
    Cloud,
    ClusterConfig,
    Environment,
    MonitoringConfig,
    NetworkConfig,
    PlatformConfig,
    PoolConfig,
    RetrainingConfig,
    ServingConfig,
)

__all__ = [
    "CLOUDS", "DATA_CLASSIFICATIONS", "DEFAULT_REGION", "ENVIRONMENTS", "EU_REGIONS", "HOURS_PER_MONTH",
    "MAX_ROTATION_DAYS", "MIN_AUDIT_RETENTION_DAYS", "OPEN_CIDRS", "PROJECT", "REQUIRED_TAGS", "AwsConfig",
    "AzureConfig", "BudgetConfig", "Cloud", "ClusterConfig", "ConfigError", "Environment", "MonitoringConfig", "NetworkConfig",
    "PlatformConfig", "PoolConfig", "RetrainingConfig", "ServingConfig", "load", "parse", "project_keys",
]  # fmt: skip

# Keys whose values are objects: Pulumi hands a program these as JSON text.
_STRUCTURED = ("tags", "network", "cluster", "budget", "serving", "aws", "azure", "monitoring", "retraining")


def parse(raw: Mapping[str, Any], *, stack: str) -> PlatformConfig:
    """Validate the stack's project config (keys without the `eu-ml-platform:` prefix)."""
    data = {k: v for k, v in raw.items() if v is not None}
    if "stack" in data:
        raise ConfigError(
            "stack", data["stack"], "the stack name comes from `pulumi stack select`, not config"
        )
    for key in _STRUCTURED:
        if isinstance(data.get(key), str):
            try:
                data[key] = json.loads(data[key])
            except json.JSONDecodeError:
                raise ConfigError(
                    key, data[key], "expected a YAML object (Pulumi passes it as JSON)"
                ) from None
    if "region" not in data and data.get("cloud") in DEFAULT_REGION:
        data["region"] = DEFAULT_REGION[data["cloud"]]
    try:
        cfg = PlatformConfig.model_validate({**data, "stack": stack})
    except ValidationError as err:
        raise from_validation_error(PlatformConfig, err) from None
    check(cfg)
    return cfg


def project_keys(config: Mapping[str, Any], project: str = PROJECT) -> dict[str, Any]:
    """The `<project>:key` entries of a full Pulumi config map, without the prefix."""
    prefix = f"{project}:"
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


def load() -> PlatformConfig:
    """Read the running stack's config (what `pulumi up` passes the program) and validate it."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    everything = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    return parse(project_keys(everything, pulumi.get_project()), stack=pulumi.get_stack())
