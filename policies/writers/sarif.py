"""reports/policy.sarif: SARIF 2.1.0 for GitHub code scanning.

Each result has exactly one location: the program line that declares the resource (recorded by
infra/plan.py as `source`), or for a stack-wide finding the stack's settings file `Pulumi.<stack>.yaml`.
Paths are relative to the repository root (`%SRCROOT%`) and never point into git-ignored folders
(rendered plans and manifests under reports/ are not something a reviewer can open in the repository).
Rules carry `security-severity`, the number GitHub ranks alerts by.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from policies import analyze, frameworks
from policies.evidence import Report, _refs
from policies.rules import ALL_RULES
from policies.writers.markdown import checkov_rules

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {"mandatory": "error", "advisory": "warning", "disabled": "none", "remediate": "error"}
# GitHub: >= 9.0 critical, 7.0-8.9 high, 4.0-6.9 medium, 0.1-3.9 low.
SECURITY_SEVERITY = {"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "3.0"}
SRCROOT = "%SRCROOT%"


def ignored(paths: Iterable[str], root: Path = analyze.REPO_ROOT) -> set[str]:
    """The paths git ignores (`git check-ignore`); all of them when git cannot answer (fail closed)."""
    paths = sorted(set(paths))
    if not paths:
        return set()
    try:
        proc = subprocess.run(
            ["git", "check-ignore", "--stdin"],
            cwd=root,
            input="\n".join(paths),
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except OSError:
        return set(paths)
    if proc.returncode not in (0, 1):
        return set(paths)
    return set(proc.stdout.split())


def _location(uri: str, line: int, urn: str | None, stack: str) -> dict[str, Any]:
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": uri, "uriBaseId": SRCROOT},
            "region": {"startLine": max(int(line), 1)},
        },
        "logicalLocations": [{"fullyQualifiedName": urn or f"stack:{stack}", "kind": "resource"}],
    }


def _rules(report: Report) -> list[dict[str, Any]]:
    out = []
    for rule in ALL_RULES:
        out.append(
            {
                "id": rule.name,
                # SARIF wants a readable name distinct from the id (sarif-multitool SARIF1001 otherwise).
                "name": "".join(part.capitalize() for part in rule.name.split("-")),
                "shortDescription": {"text": rule.description},
                "fullDescription": {
                    "text": f"{rule.description} Regulations: {_refs(report.mapping, rule.name)}"
                },
                "helpUri": rule.url,
                "help": {"text": rule.remediation},
                "defaultConfiguration": {"level": _SARIF_LEVEL[rule.enforcement]},
                "properties": {
                    "tags": [
                        "security",
                        *[k for k in frameworks.FRAMEWORK_KEYS if report.mapping.references(rule.name, k)],
                    ],
                    "security-severity": SECURITY_SEVERITY[rule.severity],
                    "precision": "high",
                    **{k: report.mapping.references(rule.name, k) for k in frameworks.FRAMEWORK_KEYS},
                },
            }
        )
    return out


def _results(report: Report) -> list[dict[str, Any]]:
    results = []
    stack_files = {d["stack"]: f"Pulumi.{d['stack']}.yaml" for d in report.docs}
    sources = {r["urn"]: r.get("source") for d in report.docs for r in d["resources"]}
    candidates = set(stack_files.values()) | {s["file"] for s in sources.values() if s}
    hidden = ignored(candidates)
    hidden |= {p for p in candidates if not (analyze.REPO_ROOT / p).is_file()}
    for d in report.docs:
        stack = d["stack"]
        findings = [(v, None) for v in d["violations"]]  # undetermined checks included
        findings += [(v, v["waiver"]) for v in d["waived"]]
        for v, waiver in findings:
            source = sources.get(v["urn"]) if v["urn"] else None
            if source and source["file"] not in hidden:
                location = _location(source["file"], source["line"], v["urn"], stack)
            elif stack_files[stack] not in hidden:
                location = _location(stack_files[stack], 1, v["urn"], stack)
            else:
                location = {
                    "logicalLocations": [
                        {"fullyQualifiedName": v["urn"] or f"stack:{stack}", "kind": "resource"}
                    ]
                }
            result: dict[str, Any] = {
                "ruleId": v["policy"],
                # Every stack's finding on one shared source line would get one and the same line-hash
                # fingerprint from upload-sarif, and GitHub would merge them into one alert (one waived,
                # another not, in the same alert): the stack and resource make each finding its own.
                "partialFingerprints": {
                    "policyFinding/v1": hashlib.sha256(
                        "|".join((stack, v["policy"], v["urn"] or "", v["message"])).encode()
                    ).hexdigest()
                },
                "level": _SARIF_LEVEL.get(v["enforcement"], "warning"),
                "message": {"text": f"[{stack}] {v['message']}"},
                "locations": [location],
                "properties": {
                    "stack": stack,
                    "enforcement": v["enforcement"],
                    "severity": v["severity"],
                    "undetermined": bool(v.get("undetermined")),
                },
            }
            if waiver:
                result["suppressions"] = [
                    {
                        "kind": "external",
                        "status": "accepted",
                        "justification": f"{waiver['justification']} (waiver #{waiver['id']}, approved by "
                        f"{waiver['approver']}, expires {waiver['expires']})",
                    }
                ]
            results.append(result)
    return results


def _checkov_run(report: Report) -> dict[str, Any] | None:
    if not report.checkov_summary:
        return None
    # Findings on rendered manifests (git-ignored reports/) stay in compliance.md, not in code scanning.
    files = {f.file.lstrip("/") for f in report.checkov_findings}
    hidden = ignored(files) | {p for p in files if not (analyze.REPO_ROOT / p).is_file()}
    shown = [f for f in report.checkov_findings if f.file.lstrip("/") not in hidden]
    mapped = checkov_rules()
    # Without a version GitHub cannot tell the runs of two Checkov releases apart (sarif-multitool: SARIF2005).
    version = next((s.version for s in report.checkov_summary if s.version), "unknown")
    return {
        "tool": {
            "driver": {
                "name": "checkov",
                "version": version,
                "informationUri": "https://www.checkov.io",
                "rules": [
                    {"id": i, "properties": {"same-as": mapped[i]} if i in mapped else {}}
                    for i in sorted({f.check_id for f in shown})
                ],
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
                            "artifactLocation": {"uri": f.file.lstrip("/"), "uriBaseId": SRCROOT},
                            "region": {"startLine": max(f.line, 1)},
                        }
                    }
                ],
            }
            for f in shown
        ],
        "properties": {"omitted-from-git-ignored-files": len(report.checkov_findings) - len(shown)},
    }


def render_sarif(report: Report) -> dict[str, Any]:
    runs: list[dict[str, Any]] = [
        {
            "tool": {
                "driver": {
                    "name": "eu-ml-platform-policies",
                    "version": str(report.docs[0]["pack"].get("version", "")) if report.docs else "",
                    "informationUri": "https://www.pulumi.com/docs/iac/using-pulumi/crossguard/",
                    "rules": _rules(report),
                }
            },
            "properties": {
                "commit": report.commit,
                # The version stays while rules change: the digest of the pack's files says which rules ran.
                "packSha256": str(report.docs[0]["pack"].get("sha256", "")) if report.docs else "",
            },
            "results": _results(report),
        }
    ]
    checkov_run = _checkov_run(report)
    if checkov_run:
        runs.append(checkov_run)
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": runs}
