"""The evidence model every rendering shares: per rule and stack, which resources pass, fail, are
waived; per declared type, which rules check it or why it is deliberately unchecked."""

from __future__ import annotations

import datetime as dt
import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from policies import analyze, checkov, frameworks
from policies.rules import ALL_RULES, BY_NAME, covered

UNCHECKED_FILE = Path(__file__).with_name("unchecked.yaml")


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
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", ref)]


def _enforcement(report: Report, rule: str) -> str:
    for d in report.docs:
        for p in d["policies"]:
            if p["name"] == rule:
                return str(p["enforcement"])
    return BY_NAME[rule].enforcement
