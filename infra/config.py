"""The stack configuration: read once into a frozen, typed object and validated before any resource exists.

`parse(raw)` is pure (a mapping of `key -> value` without the `eu-ml-platform:` prefix, values as Pulumi
hands them to a program: strings, with objects and lists JSON-encoded). `load()` reads the running stack's
config through the Pulumi runtime and calls `parse`. Nothing else in `infra/` reads Pulumi config.

Every error names the key, the value and what is allowed, e.g.
    region: 'us-east-1' is not an EU region for aws; allowed: eu-central-1, eu-north-1, ...
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, cast

PROJECT = "eu-ml-platform"

Cloud = Literal["aws", "gcp", "azure"]
Environment = Literal["dev", "staging", "prod"]

CLOUDS: tuple[Cloud, ...] = ("aws", "gcp", "azure")
ENVIRONMENTS: tuple[Environment, ...] = ("dev", "staging", "prod")

# EU member-state regions only: London, Zurich and Oslo are in Europe but outside the EU (GDPR adequacy
# is not residency), so they are not on the lists.
EU_REGIONS: Mapping[Cloud, frozenset[str]] = {
    "aws": frozenset({"eu-south-2", "eu-central-1", "eu-west-1", "eu-west-3", "eu-south-1", "eu-north-1"}),
    "gcp": frozenset(
        {
            "europe-southwest1",
            "europe-west1",
            "europe-west3",
            "europe-west4",
            "europe-west8",
            "europe-west9",
            "europe-west10",
            "europe-west12",
            "europe-north1",
            "europe-north2",
            "europe-central2",
        }
    ),
    "azure": frozenset(
        {
            "spaincentral",
            "westeurope",
            "northeurope",
            "francecentral",
            "francesouth",
            "germanywestcentral",
            "germanynorth",
            "italynorth",
            "polandcentral",
            "swedencentral",
            "swedensouth",
        }
    ),
}
DEFAULT_REGION: Mapping[Cloud, str] = {
    "aws": "eu-south-2",
    "gcp": "europe-southwest1",
    "azure": "spaincentral",
}

REQUIRED_TAGS: tuple[str, ...] = ("project", "environment", "owner", "cost-centre", "data-classification")
DATA_CLASSIFICATIONS: tuple[str, ...] = ("public", "internal", "confidential", "restricted")

# A month of a node that never scales down: what a GPU cap can cost at most.
HOURS_PER_MONTH = 730
# GCP KMS: the ceiling for automatic rotation.
MAX_ROTATION_DAYS = 90
MIN_AUDIT_RETENTION_DAYS = 365
OPEN_CIDRS = frozenset({"0.0.0.0/0", "::/0"})


class ConfigError(ValueError):
    """A stack config value is missing, unknown or out of range; the message says how to fix it."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key}: {value!r} is not allowed; {allowed}")


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """A Kubernetes node pool. `machine_types` lists several types so spot capacity can be found."""

    machine_types: tuple[str, ...]
    min_nodes: int
    max_nodes: int
    spot: bool = False
    # Cloud accelerator name (GCP `nvidia-l4`, informational elsewhere); None for CPU pools.
    gpu_type: str | None = None
    gpus_per_node: int = 0
    # Estimated price of one node per hour in the budget's currency (spot price for spot pools).
    hourly_price: float = 0.0
    disk_gb: int = 100


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    kubernetes_version: str
    system_pool: PoolConfig
    serving_pool: PoolConfig
    gpu_pool: PoolConfig


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    cidr: str
    # Who may reach the Kubernetes API server (never 0.0.0.0/0 in staging/prod).
    api_allowed_cidrs: tuple[str, ...]
    availability_zones: int = 3


@dataclass(frozen=True, slots=True)
class BudgetConfig:
    monthly_amount: float
    currency: str
    alert_thresholds: tuple[int, ...]
    alert_emails: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ServingConfig:
    # A tag (`0.1.0-abc1234`) or digest (`sha256:...`) in this stack's serving repository, or a full reference.
    image: str
    min_replicas: int
    max_replicas: int
    gpu: bool
    # HPA target: mean queue time per request per pod, microseconds.
    queue_time_target_us: int = 50_000
    # Dev only: a KEDA ScaledObject replaces the HPA and scales to zero outside working hours.
    scale_to_zero: bool = False
    cpu: str = "2"
    memory: str = "4Gi"


@dataclass(frozen=True, slots=True)
class PlatformConfig:
    stack: str
    cloud: Cloud
    environment: Environment
    region: str
    # Short lowercase organisation name: makes global names (buckets, storage accounts, registries) unique.
    org: str
    tags: Mapping[str, str]
    network: NetworkConfig
    cluster: ClusterConfig
    budget: BudgetConfig
    serving: ServingConfig
    # Same forms as `serving.image`, in the training repository.
    training_image: str
    key_rotation_days: int = 90
    audit_retention_days: int = 365
    checkpoint_expiry_days: int = 30
    noncurrent_version_expiry_days: int = 30
    # GCP only: the project and billing account the stack deploys into.
    gcp_project: str | None = None
    gcp_billing_account: str | None = None

    @property
    def is_prod(self) -> bool:
        return self.environment == "prod"

    @property
    def name(self) -> str:
        """Prefix of every resource name: `mlp-<stack>`."""
        return f"mlp-{self.stack}"


# ---------------------------------------------------------------------------------------------------------
# Parsing: one small reader per shape, each knows its key path for the error message.

_TOP_KEYS = {
    "cloud",
    "region",
    "environment",
    "org",
    "tags",
    "network",
    "cluster",
    "budget",
    "serving",
    "trainingImage",
    "keyRotationDays",
    "auditRetentionDays",
    "checkpointExpiryDays",
    "noncurrentVersionExpiryDays",
    "gcpProject",
    "gcpBillingAccount",
}


class _Reader:
    """Typed access to one config object; remembers which keys were used so leftovers are errors."""

    def __init__(self, path: str, data: Mapping[str, Any], allowed: set[str]) -> None:
        self.path, self.data = path, data
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ConfigError(
                self._key(unknown[0]),
                data[unknown[0]],
                f"unknown key; allowed keys: {', '.join(sorted(allowed))}",
            )

    def _key(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = ...) -> Any:
        if key not in self.data or self.data[key] is None:
            if default is ...:
                raise ConfigError(self._key(key), None, "this key is required")
            return default
        return self.data[key]

    def str_(self, key: str, default: Any = ..., pattern: str | None = None, hint: str = "") -> str:
        value = self.raw(key, default)
        if not isinstance(value, str) or not value:
            raise ConfigError(self._key(key), value, "expected a non-empty string")
        if pattern and not re.fullmatch(pattern, value):
            raise ConfigError(self._key(key), value, hint or f"must match {pattern}")
        return value

    def int_(self, key: str, default: Any = ..., minimum: int = 0, maximum: int | None = None) -> int:
        value = self.raw(key, default)
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
            value = int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(self._key(key), value, "expected an integer")
        if value < minimum or (maximum is not None and value > maximum):
            upper = f" and <= {maximum}" if maximum is not None else ""
            raise ConfigError(self._key(key), value, f"expected an integer >= {minimum}{upper}")
        return value

    def float_(self, key: str, default: Any = ..., minimum: float = 0.0) -> float:
        value = self.raw(key, default)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(self._key(key), value, "expected a number") from None
        if isinstance(value, bool) or not math.isfinite(number) or number < minimum:
            raise ConfigError(self._key(key), value, f"expected a number >= {minimum}")
        return number

    def bool_(self, key: str, default: Any = ...) -> bool:
        value = self.raw(key, default)
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise ConfigError(self._key(key), value, "expected true or false")
        return value

    def strs(self, key: str, default: Any = ...) -> tuple[str, ...]:
        value = self.raw(key, default)
        if isinstance(value, str):
            value = _decode(self._key(key), value)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(self._key(key), value, "expected a list of non-empty strings")
        return tuple(value)

    def obj(self, key: str, allowed: set[str], default: Any = ...) -> _Reader:
        value = self.raw(key, default)
        if isinstance(value, str):
            value = _decode(self._key(key), value)
        if not isinstance(value, Mapping):
            raise ConfigError(
                self._key(key), value, f"expected an object with keys {', '.join(sorted(allowed))}"
            )
        return _Reader(self._key(key), value, allowed)


def _decode(key: str, value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise ConfigError(key, value, "expected a YAML object or list (Pulumi passes it as JSON)") from None


_POOL_KEYS = {"machineTypes", "min", "max", "spot", "gpuType", "gpusPerNode", "hourlyPrice", "diskGb"}


def _pool(r: _Reader, key: str, *, gpu: bool) -> PoolConfig:
    p = r.obj(key, _POOL_KEYS)
    pool = PoolConfig(
        machine_types=p.strs("machineTypes"),
        min_nodes=p.int_("min"),
        max_nodes=p.int_("max", minimum=1),
        spot=p.bool_("spot", False),
        gpu_type=p.str_("gpuType") if gpu else p.raw("gpuType", None),
        gpus_per_node=p.int_("gpusPerNode", 1 if gpu else 0, minimum=1 if gpu else 0),
        hourly_price=p.float_("hourlyPrice", 0.0),
        disk_gb=p.int_("diskGb", 100, minimum=20),
    )
    if pool.min_nodes > pool.max_nodes:
        raise ConfigError(
            f"cluster.{key}.min", pool.min_nodes, f"min must be <= cluster.{key}.max ({pool.max_nodes})"
        )
    return pool


def _cidr(key: str, value: str) -> str:
    import ipaddress

    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as err:
        raise ConfigError(key, value, f"expected a CIDR block such as 203.0.113.0/24 ({err})") from None


def parse(raw: Mapping[str, Any], *, stack: str) -> PlatformConfig:
    """Validate the stack's project config (keys without the `eu-ml-platform:` prefix)."""
    r = _Reader("", raw, _TOP_KEYS)

    cloud = r.str_("cloud")
    if cloud not in CLOUDS:
        raise ConfigError("cloud", cloud, f"allowed: {', '.join(CLOUDS)}")
    cloud = cast(Cloud, cloud)
    environment = r.str_("environment")
    if environment not in ENVIRONMENTS:
        raise ConfigError("environment", environment, f"allowed: {', '.join(ENVIRONMENTS)}")
    environment = cast(Environment, environment)
    region = r.str_("region", DEFAULT_REGION[cloud])
    if region not in EU_REGIONS[cloud]:
        raise ConfigError(
            "region", region, f"not an EU region for {cloud}; allowed: {', '.join(sorted(EU_REGIONS[cloud]))}"
        )
    org = r.str_(
        "org", pattern=r"[a-z][a-z0-9]{1,9}", hint="2-10 lowercase letters/digits, starting with a letter"
    )

    t = r.raw("tags")
    t = _decode("tags", t) if isinstance(t, str) else t
    if not isinstance(t, Mapping):
        raise ConfigError("tags", t, f"expected an object with {', '.join(REQUIRED_TAGS)}")
    tags = {str(k): str(v) for k, v in t.items()}
    for name in REQUIRED_TAGS:
        if not tags.get(name):
            raise ConfigError(f"tags.{name}", tags.get(name), f"required tags: {', '.join(REQUIRED_TAGS)}")
    if tags["environment"] != environment:
        raise ConfigError("tags.environment", tags["environment"], f"must equal environment ({environment})")
    if tags["project"] != PROJECT:
        raise ConfigError("tags.project", tags["project"], f"must be {PROJECT!r}")
    if tags["data-classification"] not in DATA_CLASSIFICATIONS:
        raise ConfigError(
            "tags.data-classification",
            tags["data-classification"],
            f"allowed: {', '.join(DATA_CLASSIFICATIONS)}",
        )
    for k, v in tags.items():
        # GCP labels are the strictest of the three clouds: lowercase, digits, '-', '_' and at most 63.
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", k) or not re.fullmatch(r"[a-z0-9_-]{0,63}", v):
            raise ConfigError(
                f"tags.{k}", v, "keys and values: lowercase letters, digits, '-' or '_' (<= 63)"
            )

    n = r.obj("network", {"cidr", "apiAllowedCidrs", "availabilityZones"})
    network = NetworkConfig(
        cidr=_cidr("network.cidr", n.str_("cidr")),
        api_allowed_cidrs=tuple(_cidr("network.apiAllowedCidrs", c) for c in n.strs("apiAllowedCidrs")),
        availability_zones=n.int_("availabilityZones", 3, minimum=2, maximum=3),
    )
    if not 16 <= int(network.cidr.split("/")[1]) <= 19:
        raise ConfigError(
            "network.cidr", network.cidr, "use a /16 to /19 (room for /20 node subnets per zone)"
        )
    if environment != "dev":
        for c in network.api_allowed_cidrs:
            if c in OPEN_CIDRS:
                raise ConfigError(
                    "network.apiAllowedCidrs",
                    c,
                    f"the API server may not be open to the internet in {environment}",
                )

    cl = r.obj("cluster", {"kubernetesVersion", "systemPool", "servingPool", "gpuPool"})
    cluster = ClusterConfig(
        kubernetes_version=cl.str_(
            "kubernetesVersion", pattern=r"1\.\d{2}", hint="a minor version such as 1.33"
        ),
        system_pool=_pool(cl, "systemPool", gpu=False),
        serving_pool=_pool(cl, "servingPool", gpu=False),
        gpu_pool=_pool(cl, "gpuPool", gpu=True),
    )
    if not cluster.gpu_pool.spot:
        raise ConfigError(
            "cluster.gpuPool.spot", False, "the training GPU pool is a spot pool: set spot: true"
        )
    if cluster.gpu_pool.min_nodes != 0:
        raise ConfigError(
            "cluster.gpuPool.min", cluster.gpu_pool.min_nodes, "the GPU pool scales from zero: min: 0"
        )
    if environment == "prod" and cluster.serving_pool.spot:
        raise ConfigError(
            "cluster.servingPool.spot", True, "prod serves from on-demand nodes: set spot: false"
        )

    b = r.obj("budget", {"monthlyAmount", "currency", "alertThresholds", "alertEmails"})
    thresholds = b.raw("alertThresholds", [50, 80, 100])
    thresholds = _decode("budget.alertThresholds", thresholds) if isinstance(thresholds, str) else thresholds
    if (
        not isinstance(thresholds, list)
        or not thresholds
        or not all(isinstance(x, int) and not isinstance(x, bool) and 0 < x <= 200 for x in thresholds)
    ):
        raise ConfigError("budget.alertThresholds", thresholds, "expected a list of percentages in 1..200")
    budget = BudgetConfig(
        monthly_amount=b.float_("monthlyAmount", minimum=1.0),
        currency=b.str_("currency", pattern=r"[A-Z]{3}", hint="an ISO 4217 code such as EUR"),
        alert_thresholds=tuple(sorted(thresholds)),
        alert_emails=b.strs("alertEmails"),
    )
    for email in budget.alert_emails:
        if not re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]{2,}", email):
            raise ConfigError("budget.alertEmails", email, "expected e-mail addresses")
    if cloud == "aws" and budget.currency != "USD":
        raise ConfigError(
            "budget.currency", budget.currency, "AWS Budgets are kept in USD: set currency: USD"
        )
    gpu = cluster.gpu_pool
    gpu_cost = gpu.max_nodes * gpu.hourly_price * HOURS_PER_MONTH
    if gpu.hourly_price <= 0:
        raise ConfigError(
            "cluster.gpuPool.hourlyPrice",
            gpu.hourly_price,
            "set the per-node price so the cap can be checked",
        )
    if gpu_cost > budget.monthly_amount:
        reach = int(budget.monthly_amount // (gpu.hourly_price * HOURS_PER_MONTH))
        raise ConfigError(
            "cluster.gpuPool.max",
            gpu.max_nodes,
            f"{gpu.max_nodes} nodes x {gpu.hourly_price} {budget.currency}/h x {HOURS_PER_MONTH} h = "
            f"{gpu_cost:.0f} {budget.currency} exceeds budget.monthlyAmount ({budget.monthly_amount:.0f}); "
            f"lower it to <= {reach} or raise the budget",
        )

    s = r.obj(
        "serving",
        {"image", "minReplicas", "maxReplicas", "gpu", "queueTimeTargetUs", "scaleToZero", "cpu", "memory"},
    )
    serving = ServingConfig(
        image=s.str_("image"),
        min_replicas=s.int_("minReplicas", minimum=0),
        max_replicas=s.int_("maxReplicas", minimum=1),
        gpu=s.bool_("gpu", False),
        queue_time_target_us=s.int_("queueTimeTargetUs", 50_000, minimum=100),
        scale_to_zero=s.bool_("scaleToZero", False),
        cpu=s.str_("cpu", "2"),
        memory=s.str_("memory", "4Gi"),
    )
    if serving.min_replicas > serving.max_replicas:
        raise ConfigError(
            "serving.minReplicas",
            serving.min_replicas,
            f"must be <= serving.maxReplicas ({serving.max_replicas})",
        )
    if serving.min_replicas == 0 and not serving.scale_to_zero:
        raise ConfigError(
            "serving.minReplicas", 0, "an HPA needs >= 1; set serving.scaleToZero: true (dev only)"
        )
    if serving.scale_to_zero and environment != "dev":
        raise ConfigError("serving.scaleToZero", True, "only dev may scale serving to zero")
    if environment == "prod" and serving.gpu:
        # The only GPU pool is the spot training pool: prod inference must not be evicted with it.
        raise ConfigError(
            "serving.gpu", True, "prod serves from the on-demand serving pool; the GPU pool is spot"
        )
    if environment == "prod" and serving.min_replicas < 2:
        raise ConfigError(
            "serving.minReplicas", serving.min_replicas, "prod keeps >= 2 replicas (PDB, zone failure)"
        )
    training_image = r.str_("trainingImage")
    for key, image in (("serving.image", serving.image), ("trainingImage", training_image)):
        if environment != "dev" and not re.search(r"(^|@)sha256:[0-9a-f]{64}$", image):
            raise ConfigError(
                key, image, f"{environment} pins images by digest: sha256:<64 hex> or <repo>@sha256:..."
            )

    cfg = PlatformConfig(
        stack=stack,
        cloud=cloud,
        environment=environment,
        region=region,
        org=org,
        # Read-only view: the frozen config cannot be changed through its tags either.
        tags=MappingProxyType(tags),
        network=network,
        cluster=cluster,
        budget=budget,
        serving=serving,
        training_image=training_image,
        key_rotation_days=r.int_("keyRotationDays", 90, minimum=1, maximum=MAX_ROTATION_DAYS),
        audit_retention_days=r.int_("auditRetentionDays", 365, minimum=MIN_AUDIT_RETENTION_DAYS),
        checkpoint_expiry_days=r.int_("checkpointExpiryDays", 30, minimum=1),
        noncurrent_version_expiry_days=r.int_("noncurrentVersionExpiryDays", 30, minimum=1),
        gcp_project=r.str_("gcpProject") if cloud == "gcp" else r.raw("gcpProject", None),
        gcp_billing_account=(
            r.str_(
                "gcpBillingAccount",
                pattern=r"[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}",
                hint="XXXXXX-XXXXXX-XXXXXX",
            )
            if cloud == "gcp"
            else r.raw("gcpBillingAccount", None)
        ),
    )
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
