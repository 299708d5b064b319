"""reports/compliance.md."""

from __future__ import annotations

from pathlib import Path

from policies import analyze, frameworks
from policies.evidence import Report, _enforcement, _refs, _short, stack_framework_matrix
from policies.rules import ALL_RULES
from policies.writers import signoff

CHECKOV_MAP = Path(__file__).resolve().parents[1] / "checkov_map.yaml"


def render_markdown(report: Report) -> str:
    m = report.mapping
    lines = [
        "# Compliance report: EU ML platform",
        "",
        f"Generated {report.generated} by `python -m policies.report` (policy pack "
        f"`{report.docs[0]['pack']['name'] if report.docs else '?'}`, {len(ALL_RULES)} rules, waivers evaluated on "
        f"{report.today.isoformat()}). Every finding below came from the CrossGuard pack over the Analyzer "
        "protocol, the same code `pulumi preview --policy-pack policies` runs.",
        "",
        *signoff.provenance(report),
        "## Result per stack",
        "",
        "| stack | cloud | environment | ENS category | resources | mandatory | undetermined | advisory | waived | result |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in report.docs:
        must = len(analyze.mandatory(d))
        adv = len(
            [v for v in d["violations"] if v["enforcement"] != "mandatory" and not v.get("undetermined")]
        )
        lines.append(
            f"| {d['stack']} | {d['cloud']} | {d['environment']} | {report.ens_category.get(d['stack'], '-')} | "
            f"{len(d['resources'])} | {must} | {len(d.get('undetermined', []))} | {adv} | "
            f"{len(d['waived'])} | {'FAIL' if must else 'pass'} |"
        )
    keys = frameworks.FRAMEWORK_KEYS
    lines += [
        "",
        "## Per stack and framework (references with a finding / references mapped)",
        "",
        "| stack | " + " | ".join(m.frameworks[k].name for k in keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for stack, cells in stack_framework_matrix(report):
        lines.append(f"| {stack} | " + " | ".join(f"{cells[k][0]} / {cells[k][1]}" for k in keys) + " |")
    lines += ["", *signoff.scope(report), *signoff.enforcement_table(), *signoff.rule_counts(report)]
    lines += [*signoff.references_md(report), *signoff.waivers_md(report)]
    lines += ["## Controls", ""]
    for rule in ALL_RULES:
        lines += [
            f"### {rule.name}",
            "",
            f"{rule.description}",
            "",
            f"- Kind: {rule.kind} policy; severity {rule.severity}; enforcement "
            f"{_enforcement(report, rule.name)}",
            f"- Regulations: {_refs(m, rule.name)}",
            f"- Remediation: {rule.remediation}",
            f"- Documentation: {rule.url}",
            "",
        ]
        for stack, c in report.controls[rule.name].items():
            lines.append(
                f"- **{stack}**: {c.status}; {len(c.evaluated)} evaluated, {len(c.passing)} passing, "
                f"{len(c.failing)} failing, {len(c.waived)} waived, {len(c.undetermined)} undetermined"
                + (f" ({c.not_applicable})" if c.not_applicable else "")
            )
            for v in c.undetermined:
                lines.append(
                    f"  - UNDETERMINED ({v['enforcement']}) {_short(v['urn'])}: {v['message'].splitlines()[0]}"
                )
            for v in c.failing:
                lines.append(
                    f"  - FAIL ({v['enforcement']}) {_short(v['urn'])}: {v['message'].splitlines()[0]}"
                )
            for v in c.waived:
                w = v["waiver"]
                lines.append(
                    f"  - WAIVED {_short(v['urn'])}: {v['message'].splitlines()[0]} (waiver by {w['approver']}, "
                    f"expires {w['expires']}: {w['justification']})"
                )
            if c.passing:
                lines.append(f"  - passing: {', '.join(_short(u) for u in c.passing)}")
        lines.append("")
    lines += render_coverage_md(report) + render_checkov_md(report) + signoff.signoff_md(report)
    if not report.parliament:
        lines += [
            "## Notes",
            "",
            "- Parliament (AWS IAM linter) is not importable in the pack's virtualenv: `aws-iam-policy-lint` "
            "reported nothing. Run `make setup` to install it.",
            "",
        ]
    return "\n".join(lines) + "\n"


def render_coverage_md(report: Report) -> list[str]:
    lines = [
        "## Coverage of the declared resource types",
        "",
        "| type | stacks | checked by | deliberately unchecked because |",
        "|---|---|---|---|",
    ]
    for t in sorted(report.coverage):
        c = report.coverage[t]
        lines.append(
            f"| `{t}` | {', '.join(c['stacks'])} | {', '.join(c['rules']) or '-'} | {c['reason'] or ('-' if c['rules'] else '**GAP: no rule and no reason**')} |"
        )
    gaps = report.uncovered()
    lines += [
        "",
        f"Types with neither a rule nor a reason: {len(gaps)}{(' (' + ', '.join(gaps) + ')') if gaps else ''}.",
        "",
    ]
    return lines


def render_checkov_md(report: Report) -> list[str]:
    lines = ["## Second opinion: Checkov", "", report.checkov_note, ""]
    versions = sorted({s.version for s in report.checkov_summary if s.version})
    if versions:
        lines += [f"Checkov version: {', '.join(versions)}", ""]
    if report.checkov_summary:
        lines += ["| framework | passed | failed | skipped | parsing errors |", "|---|---|---|---|---|"]
        for s in report.checkov_summary:
            lines.append(f"| {s.framework} | {s.passed} | {s.failed} | {s.skipped} | {s.parsing_errors} |")
        lines.append("")
    mapped = checkov_rules()
    for f in report.checkov_findings:
        rule = mapped.get(f.check_id)
        refs = f" -> same as `{rule}` ({_refs(report.mapping, rule)})" if rule else ""
        lines.append(f"- `{f.check_id}` {f.check_name}: {f.resource} ({f.file}:{f.line}){refs}")
    lines.append("")
    return lines


def checkov_rules() -> dict[str, str]:
    """Checkov check id -> the pack's rule that tests the same thing (policies/checkov_map.yaml)."""
    import yaml

    data = yaml.safe_load(CHECKOV_MAP.read_text(encoding="utf-8")) or {}
    return {str(k): str(v) for k, v in (data.get("checks") or {}).items()}
