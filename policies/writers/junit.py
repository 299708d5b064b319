"""reports/policy-junit.xml: one testcase per rule and stack; mandatory violations fail."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from policies.evidence import Report
from policies.rules import ALL_RULES


def render_junit(report: Report) -> str:
    suites = ET.Element("testsuites", name="policies")
    for d in report.docs:
        suite = ET.SubElement(suites, "testsuite", name=f"policy.{d['stack']}")
        failures = 0
        for rule in ALL_RULES:
            c = report.controls[rule.name][d["stack"]]
            case = ET.SubElement(suite, "testcase", classname=f"policy.{d['stack']}", name=rule.name)
            # An undetermined check of a mandatory rule fails the gate as a violation does.
            must = [v for v in c.failing + c.undetermined if v["enforcement"] == "mandatory"]
            if must:
                failures += 1
                fail = ET.SubElement(
                    case,
                    "failure",
                    message=f"{len(must)} mandatory violation(s) or undetermined check(s)",
                    type="mandatory",
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
