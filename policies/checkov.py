"""Checkov as a second opinion, from its own virtualenv (.venvs/checkov: it pins packaging<24).

    from policies.checkov import run_checkov
    findings = run_checkov(["containers/serving/Dockerfile"], ["dockerfile"])

Checkov reads what it can parse: the Kubernetes manifests rendered from the plans' workloads
(`render_manifests`), Dockerfiles and GitHub workflows. It runs offline: `--skip-download` and
BC_SKIP_MAPPING keep it from calling Prisma Cloud (no data leaves the machine).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from policies.paths import shown

REPO_ROOT = Path(__file__).resolve().parent.parent
CHECKOV_BIN_ENV = "CHECKOV_BIN"
DEFAULT_FRAMEWORKS = ("kubernetes", "dockerfile", "github_actions")
TIMEOUT_S = 600


class CheckovError(RuntimeError):
    """Checkov is missing or did not produce a report; the message says how to fix it."""


@dataclass(frozen=True)
class Finding:
    """One failed Checkov check."""

    check_id: str
    check_name: str
    file: str
    resource: str
    framework: str
    line: int
    severity: str | None = None
    guideline: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: [checkov {self.check_id}] {self.check_name} ({self.resource})"


@dataclass(frozen=True)
class Summary:
    framework: str
    passed: int
    failed: int
    skipped: int
    parsing_errors: int
    version: str = ""
    """Checkov's own version (its JSON summary's `checkov_version`): which checks a second opinion ran."""


def checkov_binary() -> Path:
    path = Path(os.environ.get(CHECKOV_BIN_ENV) or REPO_ROOT / ".venvs/checkov/bin/checkov")
    if not path.exists():
        raise CheckovError(f"checkov not found at {path}: run `make setup` (or set {CHECKOV_BIN_ENV})")
    return path


def scan(
    paths: Sequence[str | Path],
    frameworks: Sequence[str] = DEFAULT_FRAMEWORKS,
    *,
    skip_checks: Iterable[str] = (),
) -> tuple[list[Finding], list[Summary]]:
    """Run Checkov over files and/or folders; (failed checks, per-framework summary)."""
    if not paths:
        return [], []
    cmd = [str(checkov_binary()), "--skip-download", "--compact", "-o", "json", "--framework", *frameworks]
    # Checkov ignores -f when -d is also given: expand folders into their files.
    files = [
        str(f)
        for p in paths
        for f in (sorted(x for x in Path(p).rglob("*") if x.is_file()) if Path(p).is_dir() else [Path(p)])
    ]
    cmd += ["-f", *files]
    skips = list(skip_checks)
    if skips:
        cmd += ["--skip-check", ",".join(skips)]
    env = {
        **os.environ,
        "BC_SKIP_MAPPING": "TRUE",
        "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false",
        "LOG_LEVEL": "ERROR",
        # Offline means offline: without it Checkov asks PyPI for a newer release on every run (and caches the
        # answer under ~/.cache/checkov).
        "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true",
    }
    proc = subprocess.run(
        cmd, capture_output=True, text=True, check=False, env=env, cwd=REPO_ROOT, timeout=TIMEOUT_S
    )
    try:
        reports = json.loads(proc.stdout) if proc.stdout.strip() else []
    except json.JSONDecodeError as err:
        raise CheckovError(
            f"checkov exit {proc.returncode} without a JSON report: {proc.stderr.strip()[-1500:]}"
        ) from err
    findings: list[Finding] = []
    summaries: list[Summary] = []
    for report in reports if isinstance(reports, list) else [reports]:
        framework = str(report.get("check_type", "?"))
        summary = report.get("summary", report)
        summaries.append(
            Summary(
                framework,
                int(summary.get("passed", 0)),
                int(summary.get("failed", 0)),
                int(summary.get("skipped", 0)),
                int(summary.get("parsing_errors", 0)),
                str(summary.get("checkov_version") or ""),
            )
        )
        for check in (report.get("results") or {}).get("failed_checks", []):
            findings.append(
                Finding(
                    check_id=check["check_id"],
                    check_name=check.get("check_name", ""),
                    file=shown(check.get("file_abs_path") or check.get("file_path", "")),
                    resource=str(check.get("resource", "")),
                    framework=framework,
                    line=int((check.get("file_line_range") or [0])[0]),
                    severity=check.get("severity"),
                    guideline=check.get("guideline"),
                )
            )
    # Checkov's order follows its runners and files as its threads finish them: unsorted, two runs over the same
    # inputs listed the same findings in another order, and the reports were not byte-identical.
    findings.sort(key=lambda f: (f.file, f.line, f.check_id, f.resource, f.framework))
    return findings, sorted(summaries, key=lambda s: s.framework)


def run_checkov(
    paths: Sequence[str | Path],
    frameworks: Sequence[str] = DEFAULT_FRAMEWORKS,
    *,
    skip_checks: Iterable[str] = (),
) -> list[Finding]:
    """The stable entry point (containers.lint uses it): failed Checkov checks over `paths`."""
    return scan(paths, frameworks, skip_checks=skip_checks)[0]


# --- Kubernetes manifests from the plans -----------------------------------------------------------


def manifest(resource_type: str, inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """`kubernetes:apps/v1:Deployment` + inputs -> the YAML object `kubectl apply` would get."""
    parts = resource_type.split(":")
    if len(parts) != 3 or parts[0] != "kubernetes" or "/" not in parts[1]:
        return None
    group, version = parts[1].split("/", 1)
    api_version = version if group == "core" else f"{group}/{version}"
    body = {k: v for k, v in inputs.items() if k not in ("apiVersion", "kind")}
    return {"apiVersion": api_version, "kind": parts[2], **_ints(body)}


def _ints(value: Any) -> Any:
    """The engine carries numbers as floats (2.0); Kubernetes schemas want integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def render_manifests(plan: Mapping[str, Any], out_dir: Path) -> Path | None:
    """Write the plan's Kubernetes objects as one multi-document YAML file; None if it has none."""
    docs = [m for r in plan.get("resources", []) if (m := manifest(r["type"], r.get("inputs") or {}))]
    if not docs:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{plan['stack']}.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return path


def default_targets() -> list[Path]:
    """Dockerfiles and workflows in the repository (the manifests are added per plan)."""
    targets = sorted(REPO_ROOT.glob("containers/*/Dockerfile"))
    wf = REPO_ROOT / ".github/workflows"
    if wf.is_dir():
        targets.append(wf)
    return targets
