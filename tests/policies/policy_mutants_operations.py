"""Rule mutants, sections 11-13: registries and Helm charts, audit trails and log retention, cost
(budgets and required tags).

One mutant per failure mode of each rule, grouped by how the platform is operated;
test_policy_rules.py runs them with the other sections' cases.
"""

from __future__ import annotations

import json

import policy_fixtures as fx
from policy_mutators import _DELETE, GKE, SA, Case, _add, _drop, _inputs, _set

CASES: list[Case] = [
    # 11. registries
    (
        "ecr-mutable",
        fx.aws_stack,
        _set("aws:ecr/repository:Repository", "serving", "imageTagMutability", "MUTABLE"),
        {("registry-immutable-scanned", "serving")},
    ),
    (
        "ecr-no-scan",
        fx.aws_stack,
        _set("aws:ecr/repository:Repository", "serving", "imageScanningConfiguration.scanOnPush", False),
        {("registry-immutable-scanned", "serving")},
    ),
    (
        "ar-mutable",
        fx.gcp_stack,
        _set("gcp:artifactregistry/repository:Repository", "images", "dockerConfig.immutableTags", False),
        {("registry-immutable-scanned", "images")},
    ),
    (
        "acr-admin",
        fx.azure_stack,
        _set("azure-native:containerregistry:Registry", "acr", "adminUserEnabled", True),
        {("registry-no-anonymous-access", "acr")},
    ),
    (
        "acr-anonymous",
        fx.azure_stack,
        _set("azure-native:containerregistry:Registry", "acr", "anonymousPullEnabled", True),
        {("registry-no-anonymous-access", "acr")},
    ),
    (
        "ecr-public-policy",
        fx.aws_stack,
        lambda p: _add(
            p,
            "aws:ecr/repositoryPolicy:RepositoryPolicy",
            "serving-policy",
            {
                "repository": "serving",
                "policy": json.dumps(
                    {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "ecr:BatchGetImage"}]}
                ),
            },
        ),
        {("registry-no-anonymous-access", "serving-policy")},
    ),
    (
        "helm-floating",
        fx.aws_stack,
        lambda p: _add(
            p,
            "kubernetes:helm.sh/v3:Release",
            "autoscaler",
            {
                "chart": "cluster-autoscaler",
                "version": "9.x",
                "repositoryOpts": {"repo": "http://charts.example.eu"},
            },
        ),
        {("helm-chart-pinned", "autoscaler")},
    ),
    # 12. audit
    (
        "trail-single-region",
        fx.aws_stack,
        _set("aws:cloudtrail/trail:Trail", "trail", "isMultiRegionTrail", False),
        {("audit-trail-enabled", "trail")},
    ),
    (
        "gcp-no-audit-config",
        fx.gcp_stack,
        lambda p: _drop(p, "gcp:projects/iAMAuditConfig:IAMAuditConfig", "audit"),
        {("audit-trail-enabled", None)},
    ),
    (
        "azure-no-diagnostics",
        fx.azure_stack,
        lambda p: p.update(
            resources=[r for r in p["resources"] if r["type"] != "azure-native:monitor:DiagnosticSetting"]
        ),
        {("audit-trail-enabled", None), ("cluster-audit-logs", "cluster"), ("bucket-access-logging", "data")},
    ),
    (
        "loggroup-30-days",
        fx.aws_stack,
        _set("aws:cloudwatch/logGroup:LogGroup", "cluster-logs", "retentionInDays", 30.0),
        {("log-retention-365", "cluster-logs")},
    ),
    (
        "gcp-log-default-retention",
        fx.gcp_stack,
        _set("gcp:logging/projectBucketConfig:ProjectBucketConfig", "audit-logs", "retentionDays", _DELETE),
        {("log-retention-365", "audit-logs")},
    ),
    (
        "azure-workspace-30",
        fx.azure_stack,
        _set("azure-native:operationalinsights:Workspace", "logs", "retentionInDays", 30.0),
        {("log-retention-365", "logs")},
    ),
    # 13. cost
    (
        "aws-no-budget",
        fx.aws_stack,
        lambda p: _drop(p, "aws:budgets/budget:Budget", "monthly"),
        {("budget-alerts", None)},
    ),
    (
        "gcp-budget-no-alerts",
        fx.gcp_stack,
        _set("gcp:billing/budget:Budget", "monthly", "thresholdRules", []),
        {("budget-alerts", None)},
    ),
    (
        "azure-no-budget",
        fx.azure_stack,
        lambda p: _drop(p, "azure-native:consumption:Budget", "monthly"),
        {("budget-alerts", None)},
    ),
    (
        "aws-default-tags-missing-owner",
        fx.aws_stack,
        _set("pulumi:providers:aws", "aws-eu", "defaultTags", json.dumps({"tags": {**fx.TAGS, "owner": ""}})),
        {
            ("required-tags", n)
            for n in (
                "data-key",
                "data",
                "checkpoints",
                "models",
                "access-logs",
                "cluster",
                "gpu-lt",
                "gpu-spot",
                "serving",
                "training-data-access",
                "cluster-logs",
                "trail",
                "monthly",
            )
        },
    ),
    (
        "gcs-label-missing",
        fx.gcp_stack,
        lambda p: (
            _set(
                "pulumi:providers:gcp", "gcp-eu", "defaultLabels", json.dumps({"project": "eu-ml-platform"})
            )(p),
            _inputs(p, GKE, "cluster")["resourceLabels"].pop("cost-centre"),
        ),
        {
            ("required-tags", n)
            for n in ("data-key", "data", "checkpoints", "models", "access-logs", "cluster")
        },
    ),
    (
        "azure-tag-missing",
        fx.azure_stack,
        lambda p: _inputs(p, SA, "data").update(tags={"project": "eu-ml-platform"}),
        {("required-tags", "data")},
    ),
]
