"""Audit logging: a multi-region validated encrypted trail / audit config / diagnostic settings; 365-day retention."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .core import (
    Context,
    Finding,
    Resource,
    Rule,
    as_list,
    as_number,
    get,
    is_diagnostic_setting,
    is_unknown,
    types,
)

MIN_RETENTION_DAYS = 365
TRAIL = "aws:cloudtrail/trail:Trail"
GCP_AUDIT = "gcp:projects/iAMAuditConfig:IAMAuditConfig"
AZ_DIAG = "azure-native:monitor:DiagnosticSetting"
GCP_LOG_TYPES = frozenset({"ADMIN_READ", "DATA_READ", "DATA_WRITE"})


def clouds(resources: Sequence[Resource]) -> set[str]:
    return {r.cloud for r in resources if r.cloud in ("aws", "gcp", "azure") and not r.is_provider}


def check_trail(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    present = clouds(resources)
    if "aws" in present:
        trails = [r for r in resources if r.type == TRAIL]
        good = [
            t
            for t in trails
            if get(t.inputs, "isMultiRegionTrail") is True
            and get(t.inputs, "enableLogFileValidation") is True
            and get(t.inputs, "kmsKeyId") not in (None, "")
        ]
        if not good:
            yield Finding(
                "no CloudTrail trail with isMultiRegionTrail=True, enableLogFileValidation=True and kmsKeyId: "
                f"declare one (trails found: {[t.name for t in trails]}).",
                trails[0].urn if trails else None,
            )
    if "gcp" in present:
        ok = False
        for a in resources:
            if a.type == GCP_AUDIT and get(a.inputs, "service") == "allServices":
                kinds = {get(c, "logType") for c in as_list(get(a.inputs, "auditLogConfigs"))}
                ok = ok or kinds >= GCP_LOG_TYPES
        if not ok:
            yield Finding(
                "no IAMAuditConfig for service 'allServices' with ADMIN_READ, DATA_READ and DATA_WRITE: declare gcp.projects.IAMAuditConfig.",
                None,
            )
    if "azure" in present and not any(
        is_diagnostic_setting(r.type)
        and any(get(log, "enabled") is not False for log in as_list(get(r.inputs, "logs")))
        for r in resources
    ):
        yield Finding(
            "no azure-native insights.DiagnosticSetting sending logs to a workspace: add one for the activity log, key vault and cluster.",
            None,
        )


def check_retention(r: Resource, ctx: Context) -> Iterator[str]:
    key = {
        "aws:cloudwatch/logGroup:LogGroup": "retentionInDays",
        "gcp:logging/projectBucketConfig:ProjectBucketConfig": "retentionDays",
        "azure-native:operationalinsights:Workspace": "retentionInDays",
    }[r.type]
    raw = get(r.inputs, key)
    if is_unknown(raw):
        return
    days = as_number(raw)
    if r.type.startswith("aws:") and (days is None or days == 0):
        return  # absent/0 means "never expire" on CloudWatch: kept for >= 365 days
    if days is None:
        yield f"{key} is unset (the default is 30 days): set it to at least {MIN_RETENTION_DAYS}."
    elif days < MIN_RETENTION_DAYS:
        yield f"{key}={days:g}: keep audit logs at least {MIN_RETENTION_DAYS} days."


RULES = (
    Rule(
        name="audit-trail-enabled",
        description="Each cloud in the stack has its audit trail: CloudTrail (multi-region, validated, KMS), GCP audit config, Azure diagnostic settings.",
        kind="stack",
        severity="high",
        enforcement="advisory",
        remediation="AWS: aws.cloudtrail.Trail(is_multi_region_trail=True, enable_log_file_validation=True, kms_key_id=key.arn). GCP: gcp.projects.IAMAuditConfig(service='allServices', ...). Azure: insights.DiagnosticSetting.",
        url="https://docs.aws.amazon.com/awscloudtrail/latest/userguide/best-practices-security.html",
        validate=check_trail,
        applies_to=types(TRAIL, GCP_AUDIT, AZ_DIAG, "azure-native:insights:DiagnosticSetting"),
    ),
    Rule(
        name="log-retention-365",
        description=f"Audit and platform logs are kept at least {MIN_RETENTION_DAYS} days.",
        kind="resource",
        severity="medium",
        enforcement="advisory",
        remediation="Set retention_in_days / retention_days >= 365.",
        url="https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/Working-with-log-groups-and-streams.html#SettingLogRetention",
        validate=check_retention,
        applies_to=types(
            "aws:cloudwatch/logGroup:LogGroup",
            "gcp:logging/projectBucketConfig:ProjectBucketConfig",
            "azure-native:operationalinsights:Workspace",
        ),
    ),
)
