"""The parts of the report that make it signable: provenance, scope and limitations, enforcement by
environment, ENS category per stack, per-rule counts, per-reference evidence and the sign-off block."""

from __future__ import annotations

from typing import Any

from policies import analyze, enforcement, ens_levels, frameworks
from policies.evidence import Report, _natural, _short
from policies.paths import shown
from policies.rules import ALL_RULES, BY_NAME

LIMITATIONS = (
    "A plan-time check sees the resources and inputs the program declares, as `pulumi preview` would "
    "send them. It cannot see: runtime configuration (what runs inside containers, data in buckets, "
    "Kubernetes objects created by operators or Helm charts at install time), manual changes made in a "
    "cloud console or by another tool (drift), values unknown until deployment (listed as "
    "'undetermined'; the pack decides them at `pulumi up`), the content of the data (personal data or "
    "not), organisational measures (ENS org.*, mp.per.*, mp.if.*), and the cloud providers' own controls.",
    "Checkov's findings are a second opinion over rendered Kubernetes manifests, Dockerfiles and workflows; "
    "they never gate.",
    "'pass' means the rule evaluated at least one resource and none failed; a reference with nothing "
    "evaluated reads 'not evaluated', never 'pass'.",
)


def provenance(report: Report) -> list[str]:
    d0 = report.docs[0] if report.docs else {}
    pack = d0.get("pack", {})
    # Paths relative to the repository (or the current folder): an absolute one differs in every checkout.
    config = (
        f"`{shown(d0['config_file'])}`, sha256 `{d0.get('config_sha256')}`"
        if d0.get("config_file")
        else "none"
    )
    waivers = d0.get("waivers_file") or d0.get("waivers_path")
    lines = [
        "## Provenance",
        "",
        f"- Date: {report.generated}; waivers evaluated on {report.today.isoformat()}",
        f"- Git commit: `{report.commit}`",
        f"- Policy pack: `{pack.get('name', '?')}` version {pack.get('version', '?')}, {len(ALL_RULES)} rules; "
        f"files sha256 `{pack.get('sha256', '?')}` (the files the pack loads, as policies/pack_files.py lists "
        "them, waivers.yaml aside: the version alone does not change with the rules)",
        f"- Waivers: `{shown(waivers) if waivers else '?'}`, sha256 `{d0.get('waivers_sha256', '?')}`",
        f"- Pack config: {config}",
        "",
        "| stack | plan | sha256 |",
        "|---|---|---|",
    ]
    lines += [
        f"| {d['stack']} | `{shown(d.get('plan_file') or d['plan'])}` | `{d.get('plan_sha256', '')}` |"
        for d in report.docs
    ]
    return [*lines, ""]


def scope(report: Report) -> list[str]:
    lines = ["## Scope and limitations", ""]
    lines += [f"- {text}" for text in LIMITATIONS]
    lines += ["", "| stack | environment | ENS category assessed | applicability |", "|---|---|---|---|"]
    for d in report.docs:
        cat = report.ens_category.get(d["stack"], "not set")
        lines.append(
            f"| {d['stack']} | {d['environment']} | {cat} | Anexo II measures of category {cat} "
            "(column of the Anexo II table); only the mapped technical measures are evaluated here |"
        )
    return [*lines, ""]


def enforcement_table() -> list[str]:
    table = enforcement.load()
    envs = enforcement.ENVIRONMENTS
    lines = [
        "## Enforcement by environment (policies/enforcement.yaml)",
        "",
        f"Rules not listed keep their own level. A stack whose environment is unknown is treated as "
        f"{table.unknown_environment}.",
        "",
        "| rule | " + " | ".join(envs) + " |",
        "|---|" + "---|" * len(envs),
    ]
    lines += [f"| {rule} | " + " | ".join(row[e] for e in envs) + " |" for rule, row in table.levels.items()]
    return [*lines, ""]


def rule_counts(report: Report) -> list[str]:
    lines = [
        "## Per rule (all stacks)",
        "",
        "| rule | enforcement | evaluated | failing | waived | undetermined | stacks not applicable |",
        "|---|---|---|---|---|---|---|",
    ]
    for rule in ALL_RULES:
        cs = list(report.controls[rule.name].values())
        level = "by environment" if enforcement.load().strictest(rule.name) else rule.enforcement
        lines.append(
            f"| {rule.name} | {level} | {sum(len(c.evaluated) for c in cs)} | "
            f"{sum(len(c.failing) for c in cs)} | {sum(len(c.waived) for c in cs)} | "
            f"{sum(len(c.undetermined) for c in cs)} | {sum(1 for c in cs if c.status == 'n/a')} |"
        )
    return [*lines, ""]


def reference_rows(report: Report, key: str) -> list[dict[str, Any]]:
    """Per reference of a framework: its title, the rules, and the resources evaluated for it."""
    m = report.mapping
    refs: dict[str, list[str]] = {}
    for rule in BY_NAME:
        for ref in m.references(rule, key):
            refs.setdefault(ref, []).append(rule)
    rows = []
    for ref in sorted(refs, key=_natural):
        cs = [c for rule in refs[ref] for c in report.controls[rule].values()]
        evaluated = sorted({u for c in cs for u in c.evaluated})
        failing = sum(len(c.failing) for c in cs)
        undetermined = sum(len(c.undetermined) for c in cs)
        waived = sum(len(c.waived) for c in cs)
        if failing:
            status = "fail"
        elif undetermined:
            status = "undetermined"
        elif waived:
            status = "waived"
        else:
            status = "pass" if evaluated else "not evaluated"
        rows.append(
            {
                "ref": ref,
                "title": m.title(key, ref),
                "level": ens_level(report, ref) if key == "ens" else "",
                "rules": refs[ref],
                "why": {r: m.why(r, key, ref) for r in refs[ref]},
                "status": status,
                "evaluated": evaluated,
                "failing": failing,
                "waived": waived,
                "undetermined": undetermined,
            }
        )
    return rows


def ens_level(report: Report, ref: str) -> str:
    """'Anexo II (by category): BASICA aplica, MEDIA + R1, ALTA + R1; at MEDIA: applies + R1': the measure's
    Anexo II row (catalogue ens.annex_ii) and what it requires at each ENS category the report's stacks are
    assessed at ('not stated by source' for a measure without a row, never 'not applicable')."""
    lv = report.mapping.ens_levels
    cats = [c for c in ens_levels.CATEGORIES if c in set(report.ens_category.values())]
    head = lv.describe(ref) or f"Anexo II: {ens_levels.NOT_STATED}"
    return "; ".join([head, *(f"at {c}: {lv.applicable(ref, c)}" for c in cats)])


def references_md(report: Report) -> list[str]:
    lines = ["## Evidence per framework reference", ""]
    for key in frameworks.FRAMEWORK_KEYS:
        fw = report.mapping.frameworks[key]
        lines += [f"### {fw.name} ({fw.version})", "", f"Source: {fw.reference}", ""]
        rows = reference_rows(report, key)
        if not rows:
            lines += ["No rule maps to this framework.", ""]
            continue
        lines += [
            "| reference | title | rules (why) | status | evaluated | failing | waived | undetermined | on |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            rules = "; ".join(f"{name} ({why})" for name, why in r["why"].items())
            on = ", ".join(_short(u) for u in r["evaluated"][:8]) + (
                " ..." if len(r["evaluated"]) > 8 else ""
            )
            title = f"{r['title']} ({r['level']})" if r["level"] else r["title"]
            lines.append(
                f"| {r['ref']} | {title} | {rules} | {r['status']} | {len(r['evaluated'])} | {r['failing']} | "
                f"{r['waived']} | {r['undetermined']} | {on} |"
            )
        lines.append("")
    return lines


def waivers_md(report: Report) -> list[str]:
    lines = ["## Waivers to review", ""]
    seen = False
    for d in report.docs:
        for kind in ("expired", "unused"):
            for w in d.get("waivers", {}).get(kind, []):
                seen = True
                lines.append(
                    f"- {d['stack']}: waiver #{w['id']} ({w['rule']} on {', '.join(w['resources'])}, "
                    f"by {w['approver']}, expires {w['expires']}) is **{kind}**"
                )
    return [*lines, "" if seen else "None: every waiver is in date and matched a finding.", ""]


def signoff_md(report: Report) -> list[str]:
    must = sum(len(analyze.mandatory(d)) for d in report.docs)
    return [
        "## Sign-off",
        "",
        f"Gate result: {'FAIL' if must else 'pass'} ({must} mandatory violation(s) or undetermined check(s)).",
        "",
        "| reviewer | role | decision (accept / accept with conditions / reject) | date | signature |",
        "|---|---|---|---|---|",
        "|  | DPD |  |  |  |",
        "|  | ENS security officer (Responsable de Seguridad) |  |  |  |",
        "",
    ]
