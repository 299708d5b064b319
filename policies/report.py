"""The compliance report a reviewer can sign: `make policy` runs

    python -m policies.report --plans reports/plan --out reports

It analyzes every plan through the real pack (policies.analyze), runs Checkov over what it can read
(Kubernetes manifests rendered from the plans, Dockerfiles, GitHub workflows) and writes:
reports/policy/<stack>.json, reports/compliance.md, reports/compliance.html, reports/policy.sarif and
reports/policy-junit.xml. Exit 1 when a mandatory violation is not waived, 2 on bad input, 3 when the
pack cannot start.
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from policies import analyze, checkov, frameworks
from policies import waivers as waivers_mod
from policies.rules import ALL_RULES, BY_NAME, covered
from policies.rules.iam import parliament_available

UNCHECKED_FILE = Path(__file__).with_name("unchecked.yaml")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


# --- the model the three renderings share ------------------------------------------------------


@dataclass
class Control:
    """One rule in one stack: which resources pass, fail or are waived."""

    rule: str
    stack: str
    passing: list[str] = field(default_factory=list)
    failing: list[dict[str, Any]] = field(default_factory=list)
    waived: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.failing:
            return "fail"
        if self.waived:
            return "waived"
        return "pass" if self.passing else "n/a"


@dataclass
class Report:
    generated: str
    today: dt.date
    docs: list[dict[str, Any]]
    controls: dict[str, dict[str, Control]]  # rule -> stack -> control
    coverage: dict[str, dict[str, Any]]  # type -> {"rules": [...], "reason": str | None, "stacks": [...]}
    checkov_findings: list[checkov.Finding]
    checkov_summary: list[checkov.Summary]
    checkov_note: str
    mapping: frameworks.Mapping
    parliament: bool

    def mandatory_failures(self) -> list[dict[str, Any]]:
        return [v for d in self.docs for v in analyze.mandatory(d)]

    def uncovered(self) -> list[str]:
        return sorted(t for t, c in self.coverage.items() if not c["rules"] and not c["reason"])


def controls_for(docs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Control]]:
    out: dict[str, dict[str, Control]] = {r.name: {} for r in ALL_RULES}
    for doc in docs:
        stack = doc["stack"]
        for rule in out:
            c = Control(rule, stack)
            c.failing = [v for v in doc["violations"] if v["policy"] == rule]
            c.waived = [v for v in doc["waived"] if v["policy"] == rule]
            bad = {v["urn"] for v in c.failing + c.waived}
            c.passing = [u for u in doc["evaluated"].get(rule, []) if u not in bad]
            out[rule][stack] = c
    return out


def load_unchecked(path: Path = UNCHECKED_FILE) -> dict[str, str]:
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(k): str(v) for k, v in (data.get("unchecked") or {}).items()}


def unchecked_reason(resource_type: str, unchecked: Mapping[str, str]) -> str | None:
    """The reason a type is deliberately unchecked: an exact entry, else a glob (`eu-ml-platform:*`)."""
    import fnmatch

    if resource_type in unchecked:
        return unchecked[resource_type]
    return next((why for pat, why in unchecked.items() if fnmatch.fnmatchcase(resource_type, pat)), None)


def coverage_for(
    docs: Sequence[Mapping[str, Any]], unchecked: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for doc in docs:
        for r in doc["resources"]:
            entry = out.setdefault(
                r["type"],
                {"rules": covered(r["type"]), "reason": unchecked_reason(r["type"], unchecked), "stacks": []},
            )
            if doc["stack"] not in entry["stacks"]:
                entry["stacks"].append(doc["stack"])
    return out


# --- Markdown ----------------------------------------------------------------------------------


def _short(urn: str | None) -> str:
    if not urn:
        return "(stack)"
    parts = urn.split("::")
    return f"{parts[-1]} ({parts[-2].rsplit('$', 1)[-1]})" if len(parts) >= 2 else urn


def _refs(mapping: frameworks.Mapping, rule: str) -> str:
    return "; ".join(
        f"{mapping.frameworks[k].name} {', '.join(mapping.references(rule, k))}"
        for k in frameworks.FRAMEWORK_KEYS
        if mapping.references(rule, k)
    )


def framework_rows(report: Report, key: str) -> list[tuple[str, list[str], str, int, int, int]]:
    """(reference, rules, status, failing, waived, passing) for one framework."""
    refs: dict[str, list[str]] = {}
    for rule in BY_NAME:
        for ref in report.mapping.references(rule, key):
            refs.setdefault(ref, []).append(rule)
    rows = []
    for ref in sorted(refs, key=_natural):
        cs = [c for rule in refs[ref] for c in report.controls[rule].values()]
        failing = sum(len(c.failing) for c in cs)
        waived = sum(len(c.waived) for c in cs)
        passing = sum(len(c.passing) for c in cs)
        status = "fail" if failing else "waived" if waived else "pass"
        rows.append((ref, refs[ref], status, failing, waived, passing))
    return rows


def stack_framework_matrix(report: Report) -> list[tuple[str, dict[str, tuple[int, int]]]]:
    """Per stack, per framework: (references with an unwaived finding, references mapped)."""
    rows = []
    for d in report.docs:
        cells: dict[str, tuple[int, int]] = {}
        for key in frameworks.FRAMEWORK_KEYS:
            refs: dict[str, list[str]] = {}
            for rule in BY_NAME:
                for ref in report.mapping.references(rule, key):
                    refs.setdefault(ref, []).append(rule)
            failing = sum(
                1 for rules in refs.values() if any(report.controls[r][d["stack"]].failing for r in rules)
            )
            cells[key] = (failing, len(refs))
        rows.append((d["stack"], cells))
    return rows


def _natural(ref: str) -> list[Any]:
    import re

    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", ref)]


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


def _enforcement(report: Report, rule: str) -> str:
    for d in report.docs:
        for p in d["policies"]:
            if p["name"] == rule:
                return str(p["enforcement"])
    return BY_NAME[rule].enforcement


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


# --- HTML --------------------------------------------------------------------------------------

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
            "<table><tr><th>reference</th><th>rules</th><th>status</th><th>failing</th><th>waived</th><th>passing</th></tr>"
        )
        for ref, rules, status, failing, waived, passing in framework_rows(report, key):
            links = ", ".join(f"<a href='#{_e(r)}'>{_e(r)}</a>" for r in rules)
            out.append(
                f"<tr><td>{_e(ref)}</td><td>{links}</td><td class='{status}'>{status}</td><td>{failing}</td><td>{waived}</td><td>{passing}</td></tr>"
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
            "<table><tr><th>stack</th><th>status</th><th>failing</th><th>waived</th><th>passing</th></tr>",
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
            passing_html = ", ".join(_e(_short(u)) for u in c.passing)
            out.append(
                f"<tr><td>{_e(stack)}</td><td class='{c.status}'>{c.status}</td><td>{failing_html}</td><td>{waived_html}</td>"
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
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# --- SARIF and JUnit ---------------------------------------------------------------------------

_SARIF_LEVEL = {"mandatory": "error", "advisory": "warning", "disabled": "none", "remediate": "error"}


def render_sarif(report: Report) -> dict[str, Any]:
    rules = []
    for rule in ALL_RULES:
        rules.append(
            {
                "id": rule.name,
                "name": rule.name,
                "shortDescription": {"text": rule.description},
                "fullDescription": {
                    "text": f"{rule.description} Regulations: {_refs(report.mapping, rule.name)}"
                },
                "helpUri": rule.url,
                "help": {"text": rule.remediation},
                "defaultConfiguration": {"level": _SARIF_LEVEL[rule.enforcement]},
                "properties": {
                    "tags": [k for k in frameworks.FRAMEWORK_KEYS if report.mapping.references(rule.name, k)],
                    "severity": rule.severity,
                    **{k: report.mapping.references(rule.name, k) for k in frameworks.FRAMEWORK_KEYS},
                },
            }
        )
    results = []
    for d in report.docs:
        uri = f"Pulumi.{d['stack']}.yaml"
        for v, waiver in [(v, None) for v in d["violations"]] + [(v, v["waiver"]) for v in d["waived"]]:
            result: dict[str, Any] = {
                "ruleId": v["policy"],
                "level": _SARIF_LEVEL.get(v["enforcement"], "warning"),
                "message": {"text": v["message"]},
                "locations": [
                    {
                        "physicalLocation": {"artifactLocation": {"uri": uri}},
                        "logicalLocations": [
                            {"fullyQualifiedName": v["urn"] or f"stack:{d['stack']}", "kind": "resource"}
                        ],
                    }
                ],
                "properties": {
                    "stack": d["stack"],
                    "enforcement": v["enforcement"],
                    "severity": v["severity"],
                },
            }
            if waiver:
                result["suppressions"] = [
                    {
                        "kind": "external",
                        "status": "accepted",
                        "justification": f"{waiver['justification']} (approved by {waiver['approver']}, expires {waiver['expires']})",
                    }
                ]
            results.append(result)
    runs: list[dict[str, Any]] = [
        {
            "tool": {
                "driver": {
                    "name": "eu-ml-platform-policies",
                    "informationUri": "https://www.pulumi.com/docs/iac/using-pulumi/crossguard/",
                    "rules": rules,
                }
            },
            "results": results,
        }
    ]
    if report.checkov_summary:
        ids = sorted({f.check_id for f in report.checkov_findings})
        runs.append(
            {
                "tool": {
                    "driver": {
                        "name": "checkov",
                        "informationUri": "https://www.checkov.io",
                        "rules": [{"id": i} for i in ids],
                    }
                },
                "results": [
                    {
                        "ruleId": f.check_id,
                        "level": "warning",
                        "message": {"text": f"{f.check_name} ({f.resource})"},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": f.file},
                                    "region": {"startLine": max(f.line, 1)},
                                }
                            }
                        ],
                    }
                    for f in report.checkov_findings
                ],
            }
        )
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": runs}


def render_junit(report: Report) -> str:
    suites = ET.Element("testsuites", name="policies")
    for d in report.docs:
        suite = ET.SubElement(suites, "testsuite", name=f"policy.{d['stack']}")
        failures = 0
        for rule in ALL_RULES:
            c = report.controls[rule.name][d["stack"]]
            case = ET.SubElement(suite, "testcase", classname=f"policy.{d['stack']}", name=rule.name)
            must = [v for v in c.failing if v["enforcement"] == "mandatory"]
            if must:
                failures += 1
                fail = ET.SubElement(
                    case, "failure", message=f"{len(must)} mandatory violation(s)", type="mandatory"
                )
                fail.text = "\n".join(f"{v['urn'] or '(stack)'}: {v['message']}" for v in must)
            notes = [
                f"ADVISORY {v['urn'] or '(stack)'}: {v['message']}"
                for v in c.failing
                if v["enforcement"] != "mandatory"
            ]
            notes += [
                f"WAIVED {v['urn'] or '(stack)'}: {v['message']} [{v['waiver']['approver']}, until {v['waiver']['expires']}]"
                for v in c.waived
            ]
            if notes:
                ET.SubElement(case, "system-out").text = "\n".join(notes)
        suite.set("tests", str(len(ALL_RULES)))
        suite.set("failures", str(failures))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


# --- the command -------------------------------------------------------------------------------


def run_checkov(
    plan_paths: Sequence[Path], out: Path
) -> tuple[list[checkov.Finding], list[checkov.Summary], str]:
    targets: list[Path] = []
    for p in plan_paths:
        rendered = checkov.render_manifests(
            json.loads(p.read_text(encoding="utf-8")), out / "policy" / "manifests"
        )
        if rendered:
            targets.append(rendered)
    targets += checkov.default_targets()
    try:
        findings, summary = checkov.scan(targets)
    except (checkov.CheckovError, OSError) as err:
        return [], [], f"Checkov did not run: {err}"
    names = ", ".join(checkov._rel(str(t)) for t in targets)
    return (
        findings,
        summary,
        f"Checkov {len(findings)} failed check(s) over {names}. Advisory: shown beside the pack's findings, never gating.",
    )


def build(
    plans_dir: Path,
    out: Path,
    *,
    config_path: Path | None = None,
    waivers_path: Path = waivers_mod.WAIVERS_FILE,
    today: dt.date | None = None,
    with_checkov: bool = True,
    python: Path | None = None,
) -> Report:
    plan_paths = sorted(plans_dir.glob("*.json")) if plans_dir.is_dir() else []
    if not plan_paths:
        raise analyze.PlanError(
            f"{plans_dir}: no plan files; run `python -m infra.plan --out {plans_dir}` first"
        )
    today = today or dt.date.today()
    docs = analyze.run(
        plan_paths,
        out / "policy",
        config_path=config_path,
        waivers_path=waivers_path,
        today=today,
        python=python,
    )
    if with_checkov:
        findings, summary, note = run_checkov(plan_paths, out)
    else:
        findings, summary, note = [], [], "Checkov was skipped (--no-checkov)."
    report = Report(
        generated=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        today=today,
        docs=docs,
        controls=controls_for(docs),
        coverage=coverage_for(docs, load_unchecked()),
        checkov_findings=findings,
        checkov_summary=summary,
        checkov_note=note,
        mapping=frameworks.load(),
        parliament=_pack_has_parliament(python),
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "compliance.md").write_text(render_markdown(report), encoding="utf-8")
    (out / "compliance.html").write_text(render_html(report), encoding="utf-8")
    (out / "policy.sarif").write_text(json.dumps(render_sarif(report), indent=2) + "\n", encoding="utf-8")
    (out / "policy-junit.xml").write_text(render_junit(report), encoding="utf-8")
    return report


def _pack_has_parliament(python: Path | None) -> bool:
    """Parliament matters where the pack runs (its venv), not here; ask that interpreter."""
    import subprocess

    try:
        exe = python or analyze.pack_python()
    except analyze.PackError:
        return parliament_available()
    proc = subprocess.run([str(exe), "-c", "import parliament"], capture_output=True, check=False, timeout=60)
    return proc.returncode == 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policies.report", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--plans", type=Path, default=Path("reports/plan"), help="folder of <stack>.json plans"
    )
    parser.add_argument("--out", type=Path, default=Path("reports"), help="report folder")
    parser.add_argument(
        "--config", type=Path, help="pack config JSON (as `pulumi preview --policy-pack-config`)"
    )
    parser.add_argument("--waivers", type=Path, default=waivers_mod.WAIVERS_FILE)
    parser.add_argument("--today", type=dt.date.fromisoformat, help="evaluate waiver expiry as of this date")
    parser.add_argument("--no-checkov", action="store_true", help="skip the Checkov second opinion")
    args = parser.parse_args(argv)
    try:
        report = build(
            args.plans,
            args.out,
            config_path=args.config,
            waivers_path=args.waivers,
            today=args.today,
            with_checkov=not args.no_checkov,
        )
    except analyze.PlanError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except analyze.PackError as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    for d in report.docs:
        must = analyze.mandatory(d)
        print(
            f"{d['stack']}: {len(d['violations'])} violation(s) ({len(must)} mandatory), {len(d['waived'])} waived"
        )
        for v in must[:20]:
            print(f"  MANDATORY {v['policy']} {_short(v['urn'])}: {v['message'].splitlines()[0]}")
        if len(must) > 20:
            print(f"  ... and {len(must) - 20} more (see the JSON)")
    gaps = report.uncovered()
    if gaps:
        print(
            f"coverage: {len(gaps)} resource type(s) with no rule and no reason in {UNCHECKED_FILE.name}: {gaps}"
        )
    print(f"checkov: {len(report.checkov_findings)} failed check(s)")
    print(
        f"reports: {args.out / 'compliance.md'}, compliance.html, policy.sarif, policy-junit.xml, policy/<stack>.json"
    )
    return 1 if report.mandatory_failures() else 0


if __name__ == "__main__":
    sys.exit(main())
