"""reports/policy.sarif: SARIF 2.1.0 for GitHub code scanning."""

from __future__ import annotations

from typing import Any

from policies import frameworks
from policies.evidence import Report, _refs
from policies.rules import ALL_RULES

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
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
