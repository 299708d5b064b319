"""reports/compliance.md."""

from __future__ import annotations

from policies import analyze, frameworks
from policies.evidence import Report, _enforcement, _refs, _short, framework_rows, stack_framework_matrix
from policies.rules import ALL_RULES


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
        "## Result per stack",
        "",
        "| stack | cloud | environment | resources | mandatory | advisory | waived | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in report.docs:
        must = len(analyze.mandatory(d))
        adv = len(d["violations"]) - must
        lines.append(
            f"| {d['stack']} | {d['cloud']} | {d['environment']} | {len(d['resources'])} | {must} | {adv} | "
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
    lines += ["", "## Summary per framework", ""]
    for key in frameworks.FRAMEWORK_KEYS:
        fw = m.frameworks[key]
        rows = framework_rows(report, key)
        lines += [f"### {fw.name} ({fw.version})", "", f"Source: {fw.reference}", ""]
        if not rows:
            lines += ["No rule maps to this framework.", ""]
            continue
        lines += ["| reference | rules | status | failing | waived | passing |", "|---|---|---|---|---|---|"]
        for ref, rules, status, failing, waived, passing in rows:
            lines.append(f"| {ref} | {', '.join(rules)} | {status} | {failing} | {waived} | {passing} |")
        lines.append("")
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
                f"- **{stack}**: {c.status}; {len(c.passing)} passing, {len(c.failing)} failing, {len(c.waived)} waived"
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
    lines += render_coverage_md(report) + render_checkov_md(report)
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
    if report.checkov_summary:
        lines += ["| framework | passed | failed | skipped | parsing errors |", "|---|---|---|---|---|"]
        for s in report.checkov_summary:
            lines.append(f"| {s.framework} | {s.passed} | {s.failed} | {s.skipped} | {s.parsing_errors} |")
        lines.append("")
    for f in report.checkov_findings:
        lines.append(f"- `{f.check_id}` {f.check_name}: {f.resource} ({f.file}:{f.line})")
    lines.append("")
    return lines
