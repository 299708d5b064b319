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
    """One rule in one stack: which resources it evaluated, and which of those pass, fail, are waived or
    could not be decided. "pass" only where something was evaluated; "n/a" where nothing was."""

    rule: str
    stack: str
    evaluated: list[str] = field(default_factory=list)
    passing: list[str] = field(default_factory=list)
    failing: list[dict[str, Any]] = field(default_factory=list)
    waived: list[dict[str, Any]] = field(default_factory=list)
    undetermined: list[dict[str, Any]] = field(default_factory=list)
    not_applicable: str = ""  # why the rule does not judge this stack (environment table), if so

    @property
    def status(self) -> str:
        if self.failing:
            return "fail"
        if self.undetermined:
            return "undetermined"
        if self.waived:
            return "waived"
        return "pass" if self.evaluated else "n/a"


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
    commit: str = "unknown"
    ens_category: dict[str, str] = field(default_factory=dict)  # stack -> BASICA | MEDIA | ALTA

    def mandatory_failures(self) -> list[dict[str, Any]]:
        return [v for d in self.docs for v in analyze.mandatory(d)]

    def uncovered(self) -> list[str]:
        return sorted(t for t, c in self.coverage.items() if not c["rules"] and not c["reason"])


def controls_for(docs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Control]]:
    out: dict[str, dict[str, Control]] = {r.name: {} for r in ALL_RULES}
    for doc in docs:
        stack = doc["stack"]
        for rule in out:
            c = Control(rule, stack, not_applicable=doc.get("not_applicable", {}).get(rule, ""))
            c.failing = [v for v in doc["violations"] if v["policy"] == rule and not v.get("undetermined")]
            c.waived = [v for v in doc["waived"] if v["policy"] == rule]
            c.undetermined = [v for v in doc.get("undetermined", []) if v["policy"] == rule]
            c.evaluated = list(doc["evaluated"].get(rule, []))
            bad = {v["urn"] for v in c.failing + c.waived + c.undetermined}
            c.passing = [u for u in c.evaluated if u not in bad]
            out[rule][stack] = c
    return out


ASSESSMENT_FILE = Path(__file__).with_name("assessment.yaml")


def ens_categories(docs: Sequence[Mapping[str, Any]], path: Path = ASSESSMENT_FILE) -> dict[str, str]:
    """Per stack, the ENS category it is assessed at (policies/assessment.yaml)."""
    data = (
        (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("ens_category", {})
        if path.exists()
        else {}
    )
    by_env, by_stack = data.get("environments") or {}, data.get("stacks") or {}
    out = {}
    for d in docs:
        cat = by_stack.get(d["stack"]) or by_env.get(d.get("environment"))
        if cat is not None and cat not in ("BASICA", "MEDIA", "ALTA"):
            raise analyze.PlanError(
                f"{path}: ENS category {cat!r} for {d['stack']}: use BASICA, MEDIA or ALTA"
            )
        if cat:
            out[d["stack"]] = str(cat)
    return out


def git_commit(root: Path) -> str:
    """HEAD of the repository the plans were rendered from, '+dirty' when the tree has changes."""
    import subprocess

    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


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
