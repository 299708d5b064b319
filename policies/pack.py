"""Wrap each pure rule (policies/rules) into a CrossGuard policy object.

Imported only by policies/__main__.py, inside the pack's own virtualenv (pulumi-policy pins protobuf
5). The wrapper unwraps pulumi_policy's unknown-checking proxies so that rules see the raw values,
unknown sentinels included, and decide themselves what an unknown means for them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyComplianceFramework,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from policies import frameworks
from policies.rules import ALL_RULES, Context, Resource, Rule

PACK_NAME = "eu-ml-platform-policies"


def unwrap(value: Any) -> Any:
    """Plain dicts/lists out of pulumi_policy's _DictProxy/_ListProxy (which raise on unknowns)."""
    if isinstance(value, Mapping):
        target = value["__target"] if type(value).__name__.endswith("Proxy") else value
        return {k: unwrap(v) for k, v in target.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        target = value["__target"] if type(value).__name__.endswith("Proxy") else value  # type: ignore[call-overload]
        return [unwrap(v) for v in target]
    return value


def stack_environment() -> str | None:
    """The stack's `<project>:environment` from the config the CLI passes to the pack (PULUMI_CONFIG)."""
    project = os.environ.get("PULUMI_PROJECT")
    try:
        config = json.loads(os.environ.get("PULUMI_CONFIG") or "{}")
    except json.JSONDecodeError:
        return None
    value = config.get(f"{project}:environment") if project else None
    return str(value) if value else None


def _context(config: Mapping[str, Any], stack_tags: Mapping[str, str]) -> Context:
    """Environment: the policy's config, else the stack tag `environment`, else the stack's config."""
    cfg = dict(config or {})
    env = cfg.get("environment") or stack_tags.get("environment") or stack_environment()
    return Context(config=cfg, environment=env)


def _provider(p: Any) -> tuple[dict[str, Any], str]:
    return (unwrap(p.props), p.resource_type) if p is not None else ({}, "")


def _resource_validator(rule: Rule):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if not rule.applies_to(args.resource_type):
            return
        provider_inputs, provider_type = _provider(args.provider)
        resource = Resource(
            type=args.resource_type,
            name=args.name,
            urn=args.urn,
            inputs=unwrap(args.props),
            provider_inputs=provider_inputs,
            provider_type=provider_type,
            parent=args.opts.parent or "",
        )
        for message in rule.check_resource(resource, _context(args.get_config(), args.stack_tags)):
            report_violation(message, None)

    return validate


def _stack_validator(rule: Rule):
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = []
        for r in args.resources:
            provider_inputs, provider_type = _provider(r.provider)
            resources.append(
                Resource(
                    type=r.resource_type,
                    name=r.name,
                    urn=r.urn,
                    inputs=unwrap(r.props),
                    provider_inputs=provider_inputs,
                    provider_type=provider_type,
                    parent=r.parent.urn if r.parent is not None else "",
                    dependencies=tuple(d.urn for d in r.dependencies),
                )
            )
        for finding in rule.check_stack(resources, _context(args.get_config(), args.stack_tags)):
            report_violation(finding.message, finding.urn)

    return validate


def policy(rule: Rule, mapping: frameworks.Mapping) -> ResourceValidationPolicy | StackValidationPolicy:
    primary = mapping.primary(rule.name)
    common: dict[str, Any] = {
        "name": rule.name,
        "description": rule.description,
        "enforcement_level": EnforcementLevel(rule.enforcement),
        "config_schema": PolicyConfigSchema(properties=dict(rule.config_schema))
        if rule.config_schema
        else None,
        "severity": Severity(rule.severity),
        "framework": PolicyComplianceFramework(
            name=primary.name,
            version=primary.version,
            reference=primary.reference,
            specification=mapping.specification(rule.name),
        ),
        "tags": [k for k in frameworks.FRAMEWORK_KEYS if mapping.references(rule.name, k)],
        "remediation_steps": rule.remediation,
        "url": rule.url,
    }
    if rule.kind == "resource":
        return ResourceValidationPolicy(validate=_resource_validator(rule), **common)
    return StackValidationPolicy(validate=_stack_validator(rule), **common)


def policies() -> list[ResourceValidationPolicy | StackValidationPolicy]:
    mapping = frameworks.load()
    return [policy(rule, mapping) for rule in ALL_RULES]


def serve() -> None:
    """Start the Analyzer gRPC server; prints its port and blocks (what the Pulumi CLI expects)."""
    PolicyPack(
        name=PACK_NAME,
        policies=policies(),
        description="EU ML platform: data residency, encryption, public access, IAM, clusters, spot GPUs, "
        "serving, registries, audit and cost, mapped to GDPR, ENS, NIS2, ISO 27001 and CIS.",
        display_name="EU ML platform policies",
        provider="aws, gcp, azure, kubernetes",
        tags=["gdpr", "ens", "nis2", "iso27001", "cis"],
    )
