"""Wrap each pure rule (policies/rules) into a CrossGuard policy object.

Imported only by policies/__main__.py, inside the pack's own virtualenv (pulumi-policy pins protobuf
5). The wrapper unwraps pulumi_policy's unknown-checking proxies so that rules see the raw values,
unknown sentinels included, and decide themselves what an unknown means for them.
"""

from __future__ import annotations

import functools
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
from pulumi_policy.proxy import UnknownValueError

from policies import enforcement, frameworks
from policies import waivers as waivers_mod
from policies.rules import ALL_RULES, Context, Resource, Rule
from policies.rules.core import is_undetermined

# Set by the offline gate (policies.process): undetermined checks are reported as ordinary diagnostics
# at the policy's own level, so a mandatory rule that cannot decide fails closed.
UNDETERMINED_ENV = "POLICY_PACK_UNDETERMINED"

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


def offline_gate() -> bool:
    """The offline runner (policies.process) sets UNDETERMINED_ENV: it applies waivers itself."""
    return os.environ.get(UNDETERMINED_ENV) == "fail"


def fail_closed() -> bool:
    """Undetermined checks count as violations offline (the gate) and at update time (values are known
    then, so what is still unknown is a real gap). Under `pulumi preview` they are advisory, as the
    SDK's own "can't run policy during preview" diagnostic for an unknown value is."""
    return offline_gate() or os.environ.get("PULUMI_DRY_RUN") != "true"


class Advisory(str):
    """A message the pack reports at advisory level whatever the policy's level (a waived finding under
    the CLI, an undetermined one at preview, a rule the environment table keeps advisory)."""


def _install_advisory_channel() -> bool:
    """Let one policy report some diagnostics as advisory. pulumi-policy fixes the level per policy;
    this wraps its (private) report_violation factory. Without it (another SDK version) those findings
    keep the policy's level: the pack then fails closed instead of open."""
    try:
        from pulumi_policy import policy as sdk

        servicer = sdk._PolicyAnalyzerServicer
        original = servicer._create_report_violation
    except (ImportError, AttributeError):
        return False
    if getattr(original, "_advisory_channel", False):
        return True

    def create(
        self: Any, response: Any, name: str, description: str, level: Any, severity: Any = None
    ) -> Any:
        blocking = original(self, response, name, description, level, severity)
        advisory = original(self, response, name, description, EnforcementLevel.ADVISORY, severity)

        def report_violation(message: str, urn: str | None = None) -> None:
            if isinstance(message, Advisory):
                advisory(str(message), urn)
            else:
                blocking(message, urn)

        return report_violation

    create._advisory_channel = True  # type: ignore[attr-defined]
    servicer._create_report_violation = create
    return True


ADVISORY_CHANNEL = _install_advisory_channel()


@functools.cache
def _waivers() -> tuple[waivers_mod.Waiver, ...]:
    """policies/waivers.yaml, applied by the pack under the CLI (offline, the runner applies it); read
    once per pack process, and validated at start (serve) so a bad file fails before any preview."""
    return tuple(waivers_mod.load(rules=[r.name for r in ALL_RULES], today=waivers_mod.utc_today()))


def report(
    rule: Rule,
    items: Sequence[tuple[str, str | None]],
    report_violation: ReportViolation,
    ctx: Context,
    urn: str = "",
) -> None:
    """Report (message, urn) pairs with the level they deserve here (see Advisory)."""
    strict = fail_closed()
    table = enforcement.load().level(rule.name, ctx.environment)
    waivers = () if offline_gate() else _waivers()
    stack = os.environ.get("PULUMI_STACK", "")
    pending = []
    for message, target in items:
        waiver = waivers_mod.find(
            waivers,
            rule.name,
            target or urn,
            stack,
            waivers_mod.utc_today(),
            undetermined=is_undetermined(message),
        )
        if waiver is not None:
            note = f"waived (waiver #{waiver.index} by {waiver.approver}, until {waiver.expires}): "
            message = Advisory(note + message) if ADVISORY_CHANNEL else message
        elif is_undetermined(message) and not strict:
            if not ADVISORY_CHANNEL:
                pending.append(message if target is None else f"{message} ({target})")
                continue
            message = Advisory(message)
        elif table == "advisory" and ADVISORY_CHANNEL:
            message = Advisory(message)
        report_violation(message, target)
    if pending:
        raise UnknownValueError("; ".join(pending))


def _provider(p: Any) -> tuple[dict[str, Any], str]:
    return (unwrap(p.props), p.resource_type) if p is not None else ({}, "")


def _resource_validator(rule: Rule):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if not rule.covers(args.resource_type):
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
        ctx = _context(args.get_config(), args.stack_tags)
        if enforcement.load().level(rule.name, ctx.environment) == "not-applicable":
            return
        report(rule, [(m, None) for m in rule.check_resource(resource, ctx)], report_violation, ctx, args.urn)

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
        ctx = _context(args.get_config(), args.stack_tags)
        if enforcement.load().level(rule.name, ctx.environment) == "not-applicable":
            return
        report(rule, [(f.message, f.urn) for f in rule.check_stack(resources, ctx)], report_violation, ctx)

    return validate


def policy(rule: Rule, mapping: frameworks.Mapping) -> ResourceValidationPolicy | StackValidationPolicy:
    primary = mapping.primary(rule.name)
    common: dict[str, Any] = {
        "name": rule.name,
        "description": rule.description,
        # A rule of the environment table is declared at its strictest level and relaxed per environment.
        "enforcement_level": EnforcementLevel(enforcement.load().strictest(rule.name) or rule.enforcement),
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
    if not offline_gate():
        _waivers()  # a malformed waivers.yaml stops the pack here, with the file and entry named
    PolicyPack(
        name=PACK_NAME,
        policies=policies(),
        description="EU ML platform: data residency, encryption, public access, IAM, clusters, spot GPUs, "
        "serving, registries, audit and cost, mapped to GDPR, ENS, NIS2, ISO 27001 and CIS.",
        display_name="EU ML platform policies",
        provider="aws, gcp, azure, kubernetes",
        tags=["gdpr", "ens", "nis2", "iso27001", "cis"],
    )
