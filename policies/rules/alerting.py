"""A prod stack routes its alerts to the on-call (issue 13).

Reads the Alertmanager configuration Secret infra renders into every stack (infra/k8s/monitoring.py):
`monitoring/alertmanager-config`, whose annotations name the receivers and say whether a pager
(PagerDuty or Opsgenie) is configured. The Secret's data is a Pulumi secret and is never read.
Environment gating (prod only) comes from policies/enforcement.yaml.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .core import Context, Finding, Resource, Rule, get, is_unknown, undetermined

SECRET = "kubernetes:core/v1:Secret"
CONFIG_NAME, CONFIG_NAMESPACE = "alertmanager-config", "monitoring"
RECEIVERS = "platform.eu-ml/alert-receivers"
PAGING = "platform.eu-ml/paging"


def check_routing(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    configs = [
        r
        for r in resources
        if r.type == SECRET
        and get(r.inputs, "metadata.name") == CONFIG_NAME
        and get(r.inputs, "metadata.namespace") == CONFIG_NAMESPACE
    ]
    if not configs:
        yield Finding(
            f"no Alertmanager configuration (Secret {CONFIG_NAMESPACE}/{CONFIG_NAME}) in the stack: alerts reach nobody. "
            "Declare the monitoring stack with a PagerDuty or Opsgenie receiver.",
            None,
        )
        return
    for r in configs:
        # Annotation keys hold dots and slashes, so they are looked up directly, not as a dotted path.
        annotations = get(r.inputs, "metadata.annotations")
        value = annotations.get(PAGING) if isinstance(annotations, dict) else annotations
        receivers = annotations.get(RECEIVERS) if isinstance(annotations, dict) else None
        if is_unknown(annotations) or is_unknown(value):
            yield Finding(undetermined(f"the {PAGING} annotation is unknown at preview"), r.urn)
        elif str(value).lower() != "true":
            yield Finding(
                f"Alertmanager routes to {receivers or 'no receiver'} only: a prod stack pages the on-call. "
                "Set monitoring.pagerdutyRoutingKey or monitoring.opsgenieApiKey (as secrets) in the stack config.",
                r.urn,
            )


RULES = (
    Rule(
        name="prod-alert-routing",
        description="A prod stack has alert routing configured: Alertmanager with a paging receiver (PagerDuty or Opsgenie).",
        kind="stack",
        severity="high",
        enforcement="mandatory",
        remediation="Set monitoring.pagerdutyRoutingKey or monitoring.opsgenieApiKey with `pulumi config set --secret`; infra renders the receivers into monitoring/alertmanager-config.",
        url="https://prometheus.io/docs/alerting/latest/configuration/#receiver",
        validate=check_routing,
        applies_to=lambda t: t == SECRET,
    ),
)
