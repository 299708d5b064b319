"""Rules across fields and clouds, run on the typed config after pydantic has checked each field.

Each check raises ConfigError with the key path, the value and what to do; where the limit is a cloud's,
the message names the cloud's own definition (`limits.py`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from urllib.parse import urlsplit

from infra.config import limits
from infra.config.aws_checks import check_aws
from infra.config.errors import ConfigError
from infra.config.model import (
    DATA_CLASSIFICATIONS,
    EU_REGIONS,
    HOURS_PER_MONTH,
    OPEN_CIDRS,
    PROJECT,
    REQUIRED_TAGS,
    PlatformConfig,
)
from infra.k8s.versions import CLUSTER_AUTOSCALER
from infra.network import overlapping_cluster_range
from infra.plan_mocks import UNKNOWN

DIGEST = r"(^|@)sha256:[0-9a-f]{64}$"


def check(cfg: PlatformConfig) -> None:
    for rule in (
        _region,
        _tags,
        _network,
        _cluster,
        _budget,
        _serving,
        _keys_and_logs,
        _azure_names,
        _cloud_sections,
        check_aws,
        _retraining,
        _heartbeat,
    ):
        rule(cfg)


def _region(cfg: PlatformConfig) -> None:
    if cfg.region not in EU_REGIONS[cfg.cloud]:
        allowed = ", ".join(sorted(EU_REGIONS[cfg.cloud]))
        raise ConfigError("region", cfg.region, f"not an EU region for {cfg.cloud}; allowed: {allowed}")


def _tags(cfg: PlatformConfig) -> None:
    tags = cfg.tags
    for name in REQUIRED_TAGS:
        if not tags.get(name):
            raise ConfigError(f"tags.{name}", tags.get(name), f"required tags: {', '.join(REQUIRED_TAGS)}")
    if tags["environment"] != cfg.environment:
        raise ConfigError(
            "tags.environment", tags["environment"], f"must equal environment ({cfg.environment})"
        )
    if tags["project"] != PROJECT:
        raise ConfigError("tags.project", tags["project"], f"must be {PROJECT!r}")
    if tags["data-classification"] not in DATA_CLASSIFICATIONS:
        allowed = ", ".join(DATA_CLASSIFICATIONS)
        raise ConfigError("tags.data-classification", tags["data-classification"], f"allowed: {allowed}")
    # Each cloud bounds the tags of one resource; the platform and the provider add theirs to the stack's.
    bound, extra, carrier = limits.resource_tags(cfg.cloud)
    count = len(set(tags) | set(limits.PLATFORM_TAG_KEYS)) + limits.PLATFORM_TAGS_PER_RESOURCE + extra
    if not bound.admits(count):
        noun, cloud = (
            ("labels", "GCP") if cfg.cloud == "gcp" else ("tags", {"aws": "AWS"}.get(cfg.cloud, "Azure"))
        )
        raise ConfigError(
            "tags", f"{len(tags)} tags",
            f"with the platform's own (stack, managed-by, purpose/pool/image) {carrier} gets {count} {noun}; "
            f"{cloud} takes {bound.describe()}: remove {count - (bound.maximum or count)}",
        )  # fmt: skip
    for k, v in tags.items():
        # GCP labels are the strictest of the three clouds: lowercase, digits, '-', '_' and at most 63.
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", k) or not re.fullmatch(r"[a-z0-9_-]{0,63}", v):
            raise ConfigError(
                f"tags.{k}", v, "keys and values: lowercase letters, digits, '-' or '_' (<= 63)"
            )


def _network(cfg: PlatformConfig) -> None:
    net = cfg.network
    if not 16 <= ipaddress.ip_network(net.cidr).prefixlen <= 19:
        raise ConfigError("network.cidr", net.cidr, "use a /16 to /19 (room for /20 node subnets per zone)")
    clash = overlapping_cluster_range(cfg.cloud, net.cidr)
    if clash:
        name, block = clash
        raise ConfigError(
            "network.cidr", net.cidr, f"overlaps the {name} {block} the cluster uses: choose another range"
        )
    if not net.api_allowed_cidrs:
        # AKS and GKE read an empty list as "no restriction": the API server would be open to the internet.
        raise ConfigError(
            "network.apiAllowedCidrs", [], "list the office/VPN CIDRs that may reach the Kubernetes API"
        )
    if cfg.environment != "dev":
        for c in net.api_allowed_cidrs:
            if c in OPEN_CIDRS:
                raise ConfigError(
                    "network.apiAllowedCidrs",
                    c,
                    f"the API server may not be open to the internet in {cfg.environment}",
                )


def _cluster(cfg: PlatformConfig) -> None:
    cl = cfg.cluster
    if not limits.K8S_MIN_MINOR.admits(int(cl.kubernetes_version.split(".")[1])):
        raise ConfigError(
            "cluster.kubernetesVersion",
            cl.kubernetes_version,
            f"use 1.{limits.K8S_MIN_MINOR.minimum} or later ({limits.K8S_MIN_MINOR.source})",
        )
    if cfg.cloud == "aws" and cl.kubernetes_version not in CLUSTER_AUTOSCALER:
        known = ", ".join(CLUSTER_AUTOSCALER)
        raise ConfigError(
            "cluster.kubernetesVersion",
            cl.kubernetes_version,
            f"cluster-autoscaler must match the cluster minor and infra/k8s/versions.py knows {known}: "
            "add the minor's chart and image there",
        )
    for key, pool in (
        ("systemPool", cl.system_pool),
        ("servingPool", cl.serving_pool),
        ("gpuPool", cl.gpu_pool),
    ):
        if pool.min_nodes > pool.max_nodes:
            raise ConfigError(
                f"cluster.{key}.min", pool.min_nodes, f"min must be <= cluster.{key}.max ({pool.max_nodes})"
            )
        if cfg.cloud in limits.SINGLE_MACHINE_TYPE and len(pool.machine_types) > 1:
            raise ConfigError(
                f"cluster.{key}.machineTypes",
                list(pool.machine_types),
                f"{limits.SINGLE_MACHINE_TYPE[cfg.cloud]}: list one (the others would be ignored silently)",
            )
        zones = limits.GKE_REGIONAL_ZONES
        starts = limits.gke_initial_nodes_per_zone(pool.min_nodes) * zones
        if cfg.cloud == "gcp" and key != "gpuPool" and pool.max_nodes < starts:
            # The pool starts with the same number of nodes in each zone (infra/gcp/cluster.py).
            fits = pool.max_nodes // zones * zones
            raise ConfigError(
                f"cluster.{key}.max",
                pool.max_nodes,
                f"a regional GKE pool starts with as many nodes in each of its {zones} zones, {starts} in all to "
                f"reach min {pool.min_nodes} ({limits.GKE_REGIONAL_ZONES_SOURCE}): set max >= {starts}"
                + (f", or min <= {fits}" if fits else ""),
            )
    gpu = cl.gpu_pool
    if not gpu.spot:
        raise ConfigError(
            "cluster.gpuPool.spot", False, "the training GPU pool is a spot pool: set spot: true"
        )
    if gpu.min_nodes != 0:
        raise ConfigError("cluster.gpuPool.min", gpu.min_nodes, "the GPU pool scales from zero: min: 0")
    if not gpu.gpu_type:
        raise ConfigError("cluster.gpuPool.gpuType", gpu.gpu_type, "this key is required (e.g. nvidia-l4)")
    if gpu.gpus_per_node < 1:
        raise ConfigError("cluster.gpuPool.gpusPerNode", gpu.gpus_per_node, "expected an integer >= 1")
    if cfg.environment == "prod" and cl.serving_pool.spot:
        raise ConfigError(
            "cluster.servingPool.spot", True, "prod serves from on-demand nodes: set spot: false"
        )


def _budget(cfg: PlatformConfig) -> None:
    b, gpu = cfg.budget, cfg.cluster.gpu_pool
    if cfg.cloud == "aws" and b.currency != "USD":
        raise ConfigError("budget.currency", b.currency, "AWS Budgets are kept in USD: set currency: USD")
    if b.eur_rate is None:
        raise ConfigError(
            "budget.eurPerUnit", None,
            f"the budget job's gauges are in EUR and {b.currency} has no default rate "
            f"(infra/config/model.py DEFAULT_EUR_PER_UNIT): set budget.eurPerUnit to EUR per 1 {b.currency}",
        )  # fmt: skip
    if b.currency == "EUR" and b.eur_rate != 1.0:
        raise ConfigError(
            "budget.eurPerUnit", b.eur_per_unit, "the budget is in EUR: remove budget.eurPerUnit"
        )
    # One notification per threshold, plus the forecast-at-100% the program adds.
    notifications = len(b.alert_thresholds) + 1
    bound = {"aws": limits.aws_budget_notifications(), "azure": limits.AZURE_BUDGET_NOTIFICATIONS}.get(
        cfg.cloud
    )
    if bound is not None and not bound.admits(notifications):
        raise ConfigError(
            "budget.alertThresholds",
            list(b.alert_thresholds),
            f"{notifications} notifications (thresholds + 1 forecast); a {cfg.cloud} budget takes "
            f"{bound.describe()}: list at most {(bound.maximum or 1) - 1} thresholds",
        )
    # Every notification is sent to all of budget.alertEmails.
    subscribers = limits.aws_budget_subscribers()
    if cfg.cloud == "aws" and not subscribers.admits(len(b.alert_emails)):
        raise ConfigError(
            "budget.alertEmails",
            list(b.alert_emails),
            f"{len(b.alert_emails)} addresses; an AWS budget notification takes {subscribers.describe()}: "
            "list fewer (a mailing list reaches more people)",
        )
    if gpu.hourly_price <= 0:
        raise ConfigError(
            "cluster.gpuPool.hourlyPrice",
            gpu.hourly_price,
            "set the per-node price so the cap can be checked",
        )
    gpu_cost = gpu.max_nodes * gpu.hourly_price * HOURS_PER_MONTH
    if gpu_cost > b.monthly_amount:
        reach = int(b.monthly_amount // (gpu.hourly_price * HOURS_PER_MONTH))
        raise ConfigError(
            "cluster.gpuPool.max",
            gpu.max_nodes,
            f"{gpu.max_nodes} nodes x {gpu.hourly_price} {b.currency}/h x {HOURS_PER_MONTH} h = "
            f"{gpu_cost:.0f} {b.currency} exceeds budget.monthlyAmount ({b.monthly_amount:.0f}); "
            f"lower it to <= {reach} or raise the budget",
        )


def _serving(cfg: PlatformConfig) -> None:
    s, env = cfg.serving, cfg.environment
    for key, quantity in (("serving.cpu", s.cpu), ("serving.memory", s.memory)):
        if not re.fullmatch(limits.K8S_QUANTITY, quantity) or quantity.startswith("-"):
            raise ConfigError(
                key,
                quantity,
                f"expected a positive Kubernetes quantity such as 2, 500m or 4Gi ({limits.K8S_QUANTITY_SOURCE})",
            )
    if s.min_replicas > s.max_replicas:
        raise ConfigError(
            "serving.minReplicas", s.min_replicas, f"must be <= serving.maxReplicas ({s.max_replicas})"
        )
    if s.min_replicas == 0 and not s.scale_to_zero:
        raise ConfigError(
            "serving.minReplicas", 0, "an HPA needs >= 1; set serving.scaleToZero: true (dev only)"
        )
    if s.scale_to_zero and env != "dev":
        raise ConfigError("serving.scaleToZero", True, "only dev may scale serving to zero")
    if env == "prod" and s.gpu:
        # The only GPU pool is the spot training pool: prod inference must not be evicted with it.
        raise ConfigError(
            "serving.gpu", True, "prod serves from the on-demand serving pool; the GPU pool is spot"
        )
    if env == "prod" and s.min_replicas < 2:
        raise ConfigError(
            "serving.minReplicas", s.min_replicas, "prod keeps >= 2 replicas (PDB, zone failure)"
        )
    images = (
        ("serving.image", s.image),
        ("trainingImage", cfg.training_image),
        ("monitoring.alertmanagerImage", cfg.monitoring.alertmanager_image),
    )
    for key, image in images:
        if env != "dev" and not re.search(DIGEST, image):
            raise ConfigError(
                key, image, f"{env} pins images by digest: sha256:<64 hex> or <repo>@sha256:..."
            )


def _keys_and_logs(cfg: PlatformConfig) -> None:
    rotation = {"aws": limits.kms_rotation_days(), "azure": limits.AZURE_KEY_ROTATION}.get(cfg.cloud)
    if rotation is not None and not rotation.admits(cfg.key_rotation_days):
        raise ConfigError(
            "keyRotationDays",
            cfg.key_rotation_days,
            f"{cfg.cloud} accepts rotation periods {rotation.describe()}, and keys rotate at least every 90 days",
        )
    days = cfg.audit_retention_days
    if cfg.cloud == "aws" and days not in limits.cloudwatch_retention_days():
        allowed = [d for d in limits.cloudwatch_retention_days() if d >= 365]
        raise ConfigError(
            "auditRetentionDays",
            days,
            f"CloudWatch Logs accepts only {allowed} here ({limits.CLOUDWATCH_SOURCE})",
        )
    bound = {"azure": limits.LOG_ANALYTICS_RETENTION, "gcp": limits.GCP_LOG_BUCKET_RETENTION}.get(cfg.cloud)
    if bound is not None and not bound.admits(days):
        raise ConfigError("auditRetentionDays", days, f"expected {bound.describe()}")


def _azure_names(cfg: PlatformConfig) -> None:
    """Azure resource names hold the stack name, and storage account and key vault names org and stack too
    (`infra/naming.py` compact_name): refused here, with the REST spec's rule, rather than by ARM after half
    the stack exists."""
    if cfg.cloud != "azure":
        return
    if not re.fullmatch(limits.AZURE_STACK_NAME, cfg.stack):
        raise ConfigError(
            "stack", cfg.stack,
            f"an Azure stack name makes AKS, Log Analytics and identity names: use letters, digits and inner "
            f"hyphens only, no '_' or '.' ({limits.AZURE_STACK_NAME_SOURCE})",
        )  # fmt: skip
    from infra.naming import compact_name  # infra.naming imports infra.config

    for purpose in limits.AZURE_COMPACT_NAMES:
        compact_name(cfg, purpose)


def _cloud_sections(cfg: PlatformConfig) -> None:
    """Cloud-specific keys are required on their cloud (where they have no default) and refused on the
    others, where they would be ignored silently."""
    sections = {
        "gcpProject": ("gcp", cfg.gcp_project, True),
        "gcpBillingAccount": ("gcp", cfg.gcp_billing_account, True),
        "aws": ("aws", cfg.aws, True),
        "azure": ("azure", cfg.azure, False),
    }
    for key, (cloud, value, required) in sections.items():
        if cfg.cloud != cloud and value is not None:
            shown = value.model_dump(by_alias=True) if hasattr(value, "model_dump") else value
            raise ConfigError(
                key, shown, f"only {cloud} stacks use {key}: remove it from this {cfg.cloud} stack"
            )
        if cfg.cloud == cloud and value is None and required:
            raise ConfigError(key, None, "this key is required")
    if cfg.gcp_project is not None and not re.fullmatch(limits.GCP_PROJECT_ID, cfg.gcp_project):
        raise ConfigError(
            "gcpProject",
            cfg.gcp_project,
            f"6-30 lowercase letters, digits or hyphens ({limits.GCP_PROJECT_SOURCE})",
        )
    if cfg.aws is not None:
        if cfg.aws.admin_role == cfg.aws.deployer_role:
            raise ConfigError(
                "aws.deployerRole",
                cfg.aws.deployer_role,
                "EKS allows one access entry per principal: use two roles",
            )
        pattern, length = limits.iam_role_name()
        for key, role in (("aws.adminRole", cfg.aws.admin_role), ("aws.deployerRole", cfg.aws.deployer_role)):
            path, _, name = role.rpartition("/")
            path_ok = not path or re.fullmatch(limits.iam_path_pattern(), f"/{path}/")
            if not (path_ok and re.fullmatch(pattern, name) and length.admits(len(name))):
                raise ConfigError(
                    key,
                    role,
                    f"an IAM role name matching {pattern}, {length.describe()}, optionally after a path",
                )


def _retraining(cfg: PlatformConfig) -> None:
    """The pipeline's pods read the data themselves: a path on the deploying machine is not there. The classes
    and columns are checked as training checks them, at `pulumi preview`, not on the first night."""
    from pipeline import dag, runner

    r = cfg.retraining
    if ("/" in r.data or "\\" in r.data) and ("://" not in r.data or r.data.startswith("file://")):
        raise ConfigError(
            "retraining.data",
            r.data,
            "a path on this machine, which the pipeline's pods do not have: give a "
            "bucket URL (s3://, gs://, az://) of this stack's data bucket",
        )
    comma = [label for label in r.labels if "," in label]
    if comma:
        raise ConfigError(
            "retraining.labels",
            comma[0],
            "a class name cannot hold a comma (training's data.labels and the "
            "pipeline pass the classes comma-separated): rename the class in the data",
        )
    params = dag.Params(data=r.data, labels=",".join(r.labels), text_column=r.text_column,
                        label_column=r.label_column)  # fmt: skip
    keys = {"labels": "labels", "text_column": "textColumn", "label_column": "labelColumn", "data": "data"}
    for name, why in runner.data_problems(params):
        name = name if name in keys else "data"
        raise ConfigError(f"retraining.{keys[name]}", getattr(r, name), why)


def _heartbeat(cfg: PlatformConfig) -> None:
    """https on 443: the Alertmanager pod's NetworkPolicy lets it out on 443 and 587 only (monitoring_stack.py
    NOTIFY_PORTS). The message shows the scheme and host only: the rest of the URL is the check's credential."""
    secret = cfg.monitoring.heartbeat_url
    # Offline plans read a `secure:` value as unknown; `pulumi up` checks the decrypted URL.
    if secret is None or secret.get_secret_value() == UNKNOWN:
        return
    parts = urlsplit(secret.get_secret_value())
    host = parts.hostname or ""
    with contextlib.suppress(ValueError):  # a port that is not a number, a host that is a name
        if parts.scheme == "https" and host and parts.port in (None, 443):
            return
        if parts.scheme == "http" and (host == "localhost" or ipaddress.ip_address(host).is_loopback):
            return
    raise ConfigError(
        "monitoring.heartbeatUrl", f"{parts.scheme}://{host}/..." if parts.scheme else "(not a URL)",
        "the dead man's switch's ping URL over https on port 443 (http only to loopback, for tests): "
        "`pulumi config set --secret --path monitoring.heartbeatUrl https://hc-ping.com/<uuid>`",
    )  # fmt: skip
