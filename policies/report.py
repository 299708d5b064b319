"""The compliance report a reviewer can sign: `make policy` runs

    python -m policies.report --plans reports/plan --out reports

It analyzes every plan through the real pack (policies.analyze), runs Checkov over what it can read
(Kubernetes manifests rendered from the plans, Dockerfiles, GitHub workflows) and writes:
reports/policy/<stack>.json, reports/compliance.md, reports/compliance.html, reports/policy.sarif and
reports/policy-junit.xml. Exit 1 when a mandatory violation is not waived, 2 on bad input, 3 when the
pack cannot start or fails (4: an internal error).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from policies import analyze, checkov, frameworks
from policies import waivers as waivers_mod
from policies.evidence import (
    UNCHECKED_FILE,
    Control,
    Report,
    _short,
    controls_for,
    coverage_for,
    ens_categories,
    git_commit,
    load_unchecked,
    unchecked_reason,
)
from policies.paths import shown
from policies.rules.iam import parliament_available
from policies.writers.html import render_html
from policies.writers.junit import render_junit
from policies.writers.markdown import render_markdown
from policies.writers.sarif import render_sarif

__all__ = [
    "Control",
    "Report",
    "build",
    "controls_for",
    "coverage_for",
    "load_unchecked",
    "main",
    "render_html",
    "render_junit",
    "render_markdown",
    "render_sarif",
    "unchecked_reason",
]


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
    names = ", ".join(shown(t) for t in targets)
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
    if plans_dir.is_file():
        raise analyze.PlanError(f"--plans {plans_dir} is a file; name the folder of <stack>.json plans")
    if out.exists() and not out.is_dir():
        # Checked here: analyze.run would name --out/policy, a path the reviewer never typed.
        raise analyze.PlanError(f"--out {out} is a file; name a folder for the reports")
    plan_paths = sorted(plans_dir.glob("*.json")) if plans_dir.is_dir() else []
    _refuse_non_files(plans_dir, plan_paths)
    if not plan_paths:
        what = "no plan files (*.json)" if plans_dir.is_dir() else "no such folder"
        raise analyze.PlanError(
            f"--plans {plans_dir}: {what}; run `python -m infra.plan --out {plans_dir}` first"
        )
    today = today or waivers_mod.utc_today()
    docs = analyze.run(
        plan_paths,
        out / "policy",
        config_path=config_path,
        waivers_path=waivers_path,
        today=today,
        python=python,
        plans_dir=plans_dir,  # every plan of the folder: a result of a stack with none there is stale
    )
    if with_checkov:
        findings, summary, note = run_checkov(plan_paths, out)
    else:
        findings, summary, note = [], [], "Checkov was skipped (--no-checkov)."
    report = Report(
        # The day, not the minute: two runs over the same inputs give the same bytes, so a signature or a hash of
        # one report holds for the other (the time of day made every run's report differ).
        generated=f"{waivers_mod.utc_today().isoformat()} (UTC)",
        today=today,
        docs=docs,
        controls=controls_for(docs),
        coverage=coverage_for(docs, load_unchecked()),
        checkov_findings=findings,
        checkov_summary=summary,
        checkov_note=note,
        mapping=frameworks.load(),
        parliament=_pack_has_parliament(python),
        commit=git_commit(analyze.REPO_ROOT),
        ens_category=ens_categories(docs),
    )
    outputs = {
        "compliance.md": render_markdown(report),
        "compliance.html": render_html(report),
        "policy.sarif": json.dumps(render_sarif(report), indent=2) + "\n",
        "policy-junit.xml": render_junit(report),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, text in outputs.items():
        try:
            # Replaced, never rewritten in place: a full disk or a kill mid-write keeps the previous file whole.
            analyze.write_atomically(out / name, text)
        except OSError as err:
            raise analyze.PlanError(f"{out / name}: cannot write the report ({err})") from err
    return report


def _refuse_non_files(plans_dir: Path, entries: Sequence[Path]) -> None:
    """A `*.json` in --plans that is no plan file (a folder: `infra.plan --out reports/plan/dev.json`; a dangling
    link; a pipe) was skipped in silence: its stack was missing from the report, and its previous result was
    removed as stale. Each one is a stack the reviewer meant to see, so the run refuses and names them."""
    odd = []
    for path in entries:
        if path.is_file():
            continue
        if path.is_dir():
            try:
                inside = sorted(p.name for p in path.iterdir())[:3]
            except OSError:
                inside = []
            odd.append(f"{path.name} is a folder" + (f" (holding {', '.join(inside)})" if inside else ""))
        elif path.is_symlink() and not path.exists():
            odd.append(f"{path.name} is a link to {os.readlink(path)}, which does not exist")
        else:
            odd.append(f"{path.name} is not a regular file")
    if odd:
        raise analyze.PlanError(
            f"--plans {plans_dir}: {'; '.join(odd)}. Each *.json there is read as one stack's plan "
            "(python -m infra.plan writes <stack>.json files): replace it by the plan file, or move it out"
        )


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
    parser.add_argument(
        "--today",
        type=analyze.iso_date,
        help="evaluate waiver expiry as of this date (YYYY-MM-DD; default: today in UTC)",
    )
    parser.add_argument("--no-checkov", action="store_true", help="skip the Checkov second opinion")
    args = parser.parse_args(argv)
    try:
        with analyze.stop_pack_on_sigterm():
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
    except Exception:
        return analyze.internal_error("python -m policies.report")
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
    # The note, not a count: "0 failed" would read as a clean scan when Checkov was skipped or could not run.
    print(f"checkov: {report.checkov_note}")
    print(
        f"reports: {args.out / 'compliance.md'}, compliance.html, policy.sarif, policy-junit.xml, policy/<stack>.json"
    )
    return 1 if report.mandatory_failures() else 0


if __name__ == "__main__":
    sys.exit(main())
