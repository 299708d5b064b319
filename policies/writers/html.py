"""reports/compliance.html (self-contained, no scripts)."""

from __future__ import annotations

import html
from typing import Any

from policies import analyze, frameworks
from policies.evidence import Report, _enforcement, _refs, _short, stack_framework_matrix
from policies.rules import ALL_RULES
from policies.writers import signoff

_CSS = """body{font-family:system-ui,sans-serif;margin:2rem;max-width:72rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}.fail{color:#a00;font-weight:600}.pass{color:#070}.waived{color:#a60}code{font-size:.9em}
details{margin:.25rem 0 1rem}"""


def _e(text: Any) -> str:
    return html.escape(str(text))


def render_html(report: Report) -> str:
    m = report.mapping
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Compliance report: EU ML platform</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Compliance report: EU ML platform</h1>",
        f"<p>Generated {_e(report.generated)}; {len(ALL_RULES)} rules; waivers evaluated on {report.today.isoformat()}. "
        "Findings come from the CrossGuard pack over the Analyzer protocol.</p>",
        "<h2>Result per stack</h2><table><tr><th>stack</th><th>cloud</th><th>environment</th><th>resources</th>"
        "<th>mandatory</th><th>advisory</th><th>waived</th><th>result</th></tr>",
    ]
    for d in report.docs:
        must = len(analyze.mandatory(d))
        cls, word = ("fail", "FAIL") if must else ("pass", "pass")
        out.append(
            f"<tr><td>{_e(d['stack'])}</td><td>{_e(d['cloud'])}</td><td>{_e(d['environment'])}</td><td>{len(d['resources'])}</td>"
            f"<td>{must}</td><td>{len(d['violations']) - must}</td><td>{len(d['waived'])}</td><td class='{cls}'>{word}</td></tr>"
        )
    keys = frameworks.FRAMEWORK_KEYS
    out.append(
        "</table><h2>Per stack and framework</h2><p>References with a finding / references mapped.</p><table><tr><th>stack</th>"
    )
    out.append("".join(f"<th>{_e(m.frameworks[k].name)}</th>" for k in keys) + "</tr>")
    for stack, cells in stack_framework_matrix(report):
        tds = "".join(
            f"<td class='{'fail' if cells[k][0] else 'pass'}'>{cells[k][0]} / {cells[k][1]}</td>"
            for k in keys
        )
        out.append(f"<tr><td>{_e(stack)}</td>{tds}</tr>")
    out.append("</table><h2>Summary per framework</h2>")
    for key in frameworks.FRAMEWORK_KEYS:
        fw = m.frameworks[key]
        out.append(
            f"<h3>{_e(fw.name)} ({_e(fw.version)})</h3><p><a href='{_e(fw.reference)}'>{_e(fw.reference)}</a></p>"
        )
        out.append(
            "<table><tr><th>reference</th><th>title</th><th>rules (why)</th><th>status</th><th>evaluated</th>"
            "<th>failing</th><th>waived</th><th>undetermined</th></tr>"
        )
        for row in signoff.reference_rows(report, key):
            links = "<br>".join(
                f"<a href='#{_e(r)}'>{_e(r)}</a> ({_e(why)})" for r, why in row["why"].items()
            )
            on = ", ".join(_e(_short(u)) for u in row["evaluated"])
            status = row["status"]
            out.append(
                f"<tr><td>{_e(row['ref'])}</td><td>{_e(row['title'])}"
                + (f"<br><small>{_e(row['level'])}</small>" if row["level"] else "")
                + f"</td><td>{links}</td>"
                f"<td class='{'fail' if status == 'fail' else 'pass' if status == 'pass' else 'waived'}'>{_e(status)}</td>"
                f"<td><details><summary>{len(row['evaluated'])}</summary>{on}</details></td>"
                f"<td>{row['failing']}</td><td>{row['waived']}</td><td>{row['undetermined']}</td></tr>"
            )
        out.append("</table>")
    out.append("<h2>Controls</h2>")
    for rule in ALL_RULES:
        out += [
            f"<h3 id='{_e(rule.name)}'>{_e(rule.name)}</h3><p>{_e(rule.description)}</p><ul>",
            f"<li>Kind: {rule.kind} policy; severity {rule.severity}; enforcement {_e(_enforcement(report, rule.name))}</li>",
            f"<li>Regulations: {_e(_refs(m, rule.name))}</li>",
            f"<li>Remediation: {_e(rule.remediation)}</li>",
            f"<li>Documentation: <a href='{_e(rule.url)}'>{_e(rule.url)}</a></li></ul>",
            "<table><tr><th>stack</th><th>status</th><th>evaluated</th><th>failing</th><th>undetermined</th>"
            "<th>waived</th><th>passing</th></tr>",
        ]
        for stack, c in report.controls[rule.name].items():
            failing_html = "<br>".join(
                f"{_e(_short(v['urn']))} ({_e(v['enforcement'])}): {_e(v['message'].splitlines()[0])}"
                for v in c.failing
            )
            waived_html = "<br>".join(
                f"{_e(_short(v['urn']))}: {_e(v['message'].splitlines()[0])} (by {_e(v['waiver']['approver'])} until "
                f"{_e(v['waiver']['expires'])}: {_e(v['waiver']['justification'])})"
                for v in c.waived
            )
            undetermined_html = "<br>".join(
                f"{_e(_short(v['urn']))} ({_e(v['enforcement'])}): {_e(v['message'].splitlines()[0])}"
                for v in c.undetermined
            )
            passing_html = ", ".join(_e(_short(u)) for u in c.passing)
            status = c.status + (f" ({c.not_applicable})" if c.not_applicable else "")
            out.append(
                f"<tr><td>{_e(stack)}</td><td class='{c.status}'>{_e(status)}</td><td>{len(c.evaluated)}</td>"
                f"<td>{failing_html}</td><td>{undetermined_html}</td><td>{waived_html}</td>"
                f"<td><details><summary>{len(c.passing)}</summary>{passing_html}</details></td></tr>"
            )
        out.append("</table>")
    out.append(
        "<h2>Coverage of the declared resource types</h2><table><tr><th>type</th><th>stacks</th><th>checked by</th><th>unchecked because</th></tr>"
    )
    for t in sorted(report.coverage):
        cov = report.coverage[t]
        reason = cov["reason"] or (
            "-" if cov["rules"] else "<span class='fail'>GAP: no rule and no reason</span>"
        )
        out.append(
            f"<tr><td><code>{_e(t)}</code></td><td>{_e(', '.join(cov['stacks']))}</td><td>{_e(', '.join(cov['rules']) or '-')}</td><td>{reason if not cov['reason'] else _e(reason)}</td></tr>"
        )
    out.append(f"</table><h2>Second opinion: Checkov</h2><p>{_e(report.checkov_note)}</p>")
    if report.checkov_summary:
        out.append(
            "<table><tr><th>framework</th><th>passed</th><th>failed</th><th>skipped</th><th>parsing errors</th></tr>"
        )
        for s in report.checkov_summary:
            out.append(
                f"<tr><td>{_e(s.framework)}</td><td>{s.passed}</td><td>{s.failed}</td><td>{s.skipped}</td><td>{s.parsing_errors}</td></tr>"
            )
        out.append("</table>")
    if report.checkov_findings:
        out.append("<table><tr><th>check</th><th>name</th><th>resource</th><th>file</th></tr>")
        for f in report.checkov_findings:
            out.append(
                f"<tr><td>{_e(f.check_id)}</td><td>{_e(f.check_name)}</td><td>{_e(f.resource)}</td><td>{_e(f.file)}:{f.line}</td></tr>"
            )
        out.append("</table>")
    if not report.parliament:
        out.append(
            "<p>Parliament is not importable in the pack's virtualenv: aws-iam-policy-lint reported nothing.</p>"
        )
    # The signable parts, as in compliance.md (same source), kept verbatim for the signature.
    signable = [*signoff.provenance(report), *signoff.scope(report), *signoff.enforcement_table()]
    signable += [*signoff.rule_counts(report), *signoff.waivers_md(report), *signoff.signoff_md(report)]
    out.append(
        "<h2>Provenance, scope, enforcement and sign-off</h2><pre>" + _e("\n".join(signable)) + "</pre>"
    )
    out.append("</body></html>")
    return "\n".join(out) + "\n"
