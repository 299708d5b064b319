"""shellcheck over every `run:` script of the workflows and over .github/scripts/*.sh (`make lint`).

Each `run:` block is checked as GitHub runs it on Linux (`bash -e -o pipefail`); `${{ ... }}`
expressions are replaced by a shell variable first, because GitHub substitutes them before bash
sees the script (and an expression inside a script is itself a finding: pass it through `env:`).

    python .github/scripts/shellcheck_runs.py [WORKFLOW.yml ...]   # exit 1 on findings, 2 no shellcheck
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXPRESSION = re.compile(r"\$\{\{.*?\}\}")


def run_blocks(workflow: Path) -> list[tuple[str, str]]:
    """(`job/step` label, script) of every bash `run:` step."""
    data = yaml.safe_load(workflow.read_text())
    blocks = []
    for job_name, job in (data.get("jobs") or {}).items():
        default_shell = ((job.get("defaults") or {}).get("run") or {}).get("shell", "bash")
        for i, step in enumerate(job.get("steps") or []):
            if "run" in step and step.get("shell", default_shell) in ("bash", "sh"):
                label = f"{workflow.name}:{job_name}/{step.get('name') or step.get('id') or i}"
                blocks.append((label, str(step["run"])))
    return blocks


def check(workflows: list[Path], scripts: list[Path]) -> list[str]:
    exe = shutil.which("shellcheck")
    if exe is None:
        raise FileNotFoundError("shellcheck is not installed: apt-get install -y shellcheck")
    findings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="shellcheck-runs-") as tmp:
        for workflow in workflows:
            for n, (label, script) in enumerate(run_blocks(workflow)):
                body = EXPRESSION.sub("${GITHUB_EXPRESSION}", script)
                path = Path(tmp) / f"run-{n}.sh"
                path.write_text("#!/usr/bin/env bash\nset -eo pipefail\n" + body)
                out = subprocess.run([exe, "--format=gcc", str(path)], capture_output=True, text=True)
                if out.returncode != 0:
                    findings.append(f"{label}:\n{out.stdout.replace(str(path), 'run')}")
        if scripts:
            out = subprocess.run([exe, "--format=gcc", *map(str, scripts)], capture_output=True, text=True)
            if out.returncode != 0:
                findings.append(out.stdout)
    return findings


def main(argv: list[str]) -> int:
    workflows = [Path(a) for a in argv] or sorted((ROOT / ".github/workflows").glob("*.yml"))
    scripts = [] if argv else sorted((ROOT / ".github/scripts").glob("*.sh"))
    try:
        findings = check(workflows, scripts)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for finding in findings:
        print(finding)
    checked = sum(len(run_blocks(w)) for w in workflows)
    print(f"shellcheck: {checked} run: scripts, {len(scripts)} script files, {len(findings)} with findings")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
