"""Run the CrossGuard pack over offline plans through the real Analyzer gRPC protocol.

    python -m policies.analyze reports/plan/dev.json [more plans] --out reports/policy

For each plan this starts the pack exactly as `pulumi preview --policy-pack policies` does (the pack's
own virtualenv runs `python -u -m pulumi.policy <engine> policies`, which runs policies/__main__.py and
prints the port of its Analyzer server), then speaks to it as the engine would: Handshake,
GetAnalyzerInfo, Configure (enforcement levels + per-policy config), ConfigureStack, Analyze for each
resource, AnalyzeStack for the whole stack; then stops the process. Waivers (policies/waivers.yaml)
are applied to the diagnostics afterwards: waived findings are listed under "waived", never dropped.

Exit status: 0 no mandatory violation, 1 at least one, 2 bad input (missing/malformed plan, config or
waivers; unusable --out), 3 the pack could not be started (run `make setup`) or stopped answering (its stderr
is in the message), 4 an internal error; SIGTERM: 143, pack stopped.
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import hashlib
import json
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from policies import enforcement
from policies import waivers as waivers_mod
from policies.client import StackResult, analyze_plan, pack_config, pack_digest, pack_version
from policies.plans import Plan, PlanError, load_plan, plan_from_dict, resolve_provider, to_resources, to_wire
from policies.process import (
    PACK_DIR,
    PACK_PYTHON_ENV,
    PackError,
    PackProcess,
    pack_python,
    start_pack,
    stop_pack_on_sigterm,
)
from policies.results import RESULT_SCHEMA, Judges, plan_record, prune_stale_results, write_atomically
from policies.rules import ALL_RULES

REPO_ROOT = PACK_DIR.parent
CLOUDS = ("aws", "gcp", "azure")

__all__ = [
    "PACK_DIR",
    "PACK_PYTHON_ENV",
    "PackError",
    "PackProcess",
    "Plan",
    "PlanError",
    "RESULT_SCHEMA",
    "StackResult",
    "analyze_plan",
    "load_plan",
    "load_plans",
    "mandatory",
    "pack_config",
    "pack_digest",
    "pack_python",
    "pack_version",
    "plan_from_dict",
    "project_stacks",
    "prune_stale_results",
    "resolve_provider",
    "run",
    "start_pack",
    "stop_pack_on_sigterm",
    "to_resources",
    "to_wire",
    "write_atomically",
]


def not_applicable(plan: Plan) -> dict[str, str]:
    """Rules the environment table exempts this stack from, with the reason."""
    table = enforcement.load()
    return {
        rule.name: f"not applicable to {plan.environment or 'an unknown'} environment (policies/enforcement.yaml)"
        for rule in ALL_RULES
        if table.level(rule.name, plan.environment or None) == "not-applicable"
    }


def evaluated(plan: Plan) -> dict[str, list[str]]:
    """Per policy, the URNs whose type it checks (resource rules) or that it reads (stack rules)."""
    exempt = not_applicable(plan)
    return {
        rule.name: [] if rule.name in exempt else [r["urn"] for r in plan.resources if rule.covers(r["type"])]
        for rule in ALL_RULES
    }


def write_result(
    plan: Plan,
    result: StackResult,
    out_dir: Path,
    waivers: Sequence[waivers_mod.Waiver],
    today: dt.date,
    *,
    judges: Judges | None = None,
) -> dict[str, Any]:
    kept, waived = waivers_mod.split(result.violations, waivers, today, plan.stack)
    doc = {
        "schema": RESULT_SCHEMA,
        "stack": plan.stack,
        "cloud": plan.cloud,
        "environment": plan.environment,
        # plan, plan_file, plan_sha256: which plan this judged; a later run into the same folder keeps this
        # result while that file is unchanged (policies/results.py).
        **plan_record(plan.path, plan.sha256 or _file_sha256(plan.path)),
        "pack": result.pack,
        # waivers*, config*: what judged it besides the plan and the pack; a later run keeps this result, and the
        # promotion gate passes it, only while they are unchanged (policies/results.py Judges).
        **(judges.record() if judges is not None else {}),
        # Every unwaived finding, undetermined checks included (flagged), so readers of "violations"
        # (the promotion gate) fail closed too; "undetermined" lists the checks that could not decide.
        "violations": kept,
        "undetermined": [v for v in kept if v.get("undetermined")],
        "waived": waived,
        # This stack's waivers that are expired or matched nothing: for the reviewer to renew or remove.
        "waivers": waivers_mod.status([w for w in waivers if plan.stack in w.stacks], waived, today),
        "policies": result.policies,
        "resources": [
            {"urn": r["urn"], "type": r["type"], "name": r["name"], "source": r.get("source")}
            for r in plan.resources
        ],
        "evaluated": evaluated(plan),
        "not_applicable": not_applicable(plan),
        "resources_analyzed": result.resources_analyzed,
        "evaluated_on": today.isoformat(),
    }
    write_atomically(out_dir / f"{plan.stack}.json", json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return doc


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def mandatory(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What fails the gate: mandatory violations and mandatory checks that could not be decided."""
    return [v for v in doc["violations"] if v["enforcement"] == "mandatory"]


def run(
    plan_paths: Sequence[Path],
    out_dir: Path,
    *,
    config_path: Path | None = None,
    waivers_path: Path = waivers_mod.WAIVERS_FILE,
    today: dt.date | None = None,
    python: Path | None = None,
    plans_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """`plans_dir`: the plans of this run are all the plans of that folder (`policies.report --plans`), so a
    result in `out_dir` of a stack with no plan there is stale. Without it, the result of a stack not in this
    run stays while the plan it judged is unchanged (policies/results.py)."""
    plans = load_plans(plan_paths)  # validate every input before starting anything
    _note_result_names(plans, out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise PlanError(f"--out {out_dir} is a file; name a folder for the <stack>.json results")
    overrides, config_sha256 = _load_config(config_path) if config_path is not None else ({}, None)
    today = today or waivers_mod.utc_today()
    try:
        waivers, waivers_sha256 = waivers_mod.read(
            waivers_path, rules=[r.name for r in ALL_RULES], today=today
        )
        for plan in plans:
            waivers_mod.refuse_catch_alls(waivers, plan.stack, plan.resources)
    except waivers_mod.WaiverError as err:
        raise PlanError(str(err)) from err
    try:  # only once every input is valid: bad input leaves nothing behind, not even an empty folder
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PlanError(f"--out {out_dir}: cannot create the results folder ({err})") from err
    judges = Judges(
        waivers_path, waivers_sha256, config_path, config_sha256, pack_version(), today, pack_digest()
    )
    docs = []
    for plan in plans:
        result = analyze_plan(plan, overrides, python)
        try:
            docs.append(write_result(plan, result, out_dir, waivers, today, judges=judges))
        except OSError as err:
            raise PlanError(f"{out_dir}: cannot write the result of stack {plan.stack} ({err})") from err
    # Only once every result of this run is written: a failed run leaves the folder as the last good one did.
    prune_stale_results(
        out_dir,
        [plan.stack for plan in plans],
        project=project_stacks(),
        complete=None if plans_dir is None else f"--plans {plans_dir} holds no plan of it",
        judges=judges,
    )
    return docs


def load_plans(plan_paths: Sequence[Path]) -> list[Plan]:
    """The plans of one run, refused as a whole (PlanError) if one is bad, two are of one stack (both would
    write <stack>.json: the second result would silently replace the first), one is named after another
    stack of the project, or one holds no resources."""
    plans = [load_plan(p) for p in plan_paths]
    seen: dict[str, Path] = {}
    for plan in plans:
        if plan.stack in seen:
            if plan.path.resolve() == seen[plan.stack].resolve():
                raise PlanError(f"{plan.path} is given twice; name each plan once")
            raise PlanError(f"{plan.path} and {seen[plan.stack]} are both plans of stack {plan.stack!r}")
        seen[plan.stack] = plan.path
    _check_file_names(plans)
    for plan in plans:
        # Nothing to judge is no verdict: such a plan passed with exit 0 and its stack read "pass" in the report.
        if not plan.resources:
            raise PlanError(
                f"{plan.path}: the plan of stack {plan.stack!r} holds no resources, so no rule could judge anything "
                f"(a program that failed to render, or a truncated copy); render it again (`python -m infra.plan "
                f"--stack {plan.stack} --out {plan.path.parent}`)"
            )
    return plans


def project_stacks(*roots: Path) -> set[str]:
    """The stacks a Pulumi project declares (`Pulumi.<stack>.yaml` beside its `Pulumi.yaml`), at these folders:
    by default the project this pack sits in (`pulumi preview --policy-pack policies`) and the current one."""
    stacks: set[str] = set()
    for root in roots or (REPO_ROOT, Path.cwd()):
        if (root / "Pulumi.yaml").is_file() or (root / "Pulumi.yml").is_file():
            for path in [*root.glob("Pulumi.*.yaml"), *root.glob("Pulumi.*.yml")]:
                stacks.add(path.name.split(".", 1)[1].rsplit(".", 1)[0])
    return stacks


def _check_file_names(plans: Sequence[Plan]) -> None:
    """infra.plan writes each plan as <stack>.json and the result takes the plan's `stack`. A plan named after
    another stack of the project (prod.json holding "dev": copied or renamed) was analysed as that other stack
    in silence, and the named stack got no result (or, pruned, lost the one it had). Any other name is fine
    (plan.json, a test's good.json): run() says where its result goes."""
    stacks = project_stacks()
    for plan in plans:
        name = plan.path.stem
        if name != plan.stack and name in stacks:
            raise PlanError(
                f"{plan.path} holds the plan of stack {plan.stack!r}, not of stack {name!r} (Pulumi.{name}.yaml): "
                f"a copied or renamed plan; its result would be {plan.stack}.json and stack {name!r} would "
                f"have none. Render it again (`python -m infra.plan --stack {name} --out {plan.path.parent}`) "
                f"or name the file {plan.stack}.json"
            )


def _note_result_names(plans: Sequence[Plan], out_dir: Path) -> None:
    for plan in plans:
        if plan.path.stem == plan.stack:
            continue
        print(
            f"note: {plan.path} holds the plan of stack {plan.stack!r}: its result is "
            f"{out_dir / (plan.stack + '.json')}",
            file=sys.stderr,
        )


def _load_config(path: Path) -> tuple[dict[str, Any], str]:
    """The pack config and the sha256 of the bytes it was parsed from (a result records which config judged it)."""
    try:
        raw = path.read_bytes()
        overrides = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PlanError(f"{path}: cannot read the pack config ({err})") from err
    if not isinstance(overrides, dict):
        raise PlanError(
            f"{path}: the pack config is a JSON object of policy names (or 'all'), as "
            "`pulumi preview --policy-pack-config` takes"
        )
    # The Pulumi CLI skips a name that is no policy of the pack (ReconcilePolicyPackConfig), so a misspelt
    # policy lost its settings (a level, maxGpuNodes, allowedRegions) with no word; the gate refuses it.
    names = ["all", *(r.name for r in ALL_RULES)]
    unknown = [key for key in overrides if key not in names]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, names, n=1)
            hints.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
        raise PlanError(
            f"{path}: {', '.join(hints)} is not a policy of the pack; the pack config takes 'all' and the "
            "policy names (`python -m policies.analyze` lists them in each <stack>.json under 'policies')"
        )
    return overrides, hashlib.sha256(raw).hexdigest()


def iso_date(text: str) -> dt.date:
    """`--today`: the date form of waivers.yaml's `expires`, so the two compare as the reviewer reads them."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return dt.date.fromisoformat(text)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a date YYYY-MM-DD (e.g. {waivers_mod.utc_today().isoformat()})"
    )


EXIT_INTERNAL = 4


def internal_error(prog: str) -> int:
    """An unexpected exception mid-analysis (a bug, here or in a library) exits 4, never Python's default 1: 1 means
    "mandatory violations found", which callers accept as a verdict and then read the results in --out."""
    traceback.print_exc()
    print(
        f"error: {prog} failed (traceback above): its results are incomplete, not a verdict", file=sys.stderr
    )
    return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policies.analyze", description=__doc__.split("\n\n")[0])
    parser.add_argument("plans", nargs="+", type=Path, help="reports/plan/<stack>.json files")
    parser.add_argument("--out", type=Path, required=True, help="folder for <stack>.json results")
    parser.add_argument(
        "--config", type=Path, help="pack config JSON, as `pulumi preview --policy-pack-config`"
    )
    parser.add_argument("--waivers", type=Path, default=waivers_mod.WAIVERS_FILE)
    parser.add_argument(
        "--today",
        type=iso_date,
        help="evaluate waiver expiry as of this date (YYYY-MM-DD; default: today in UTC)",
    )
    args = parser.parse_args(argv)
    try:
        with stop_pack_on_sigterm():
            docs = run(
                args.plans, args.out, config_path=args.config, waivers_path=args.waivers, today=args.today
            )
    except PlanError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except PackError as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    except Exception:
        return internal_error("python -m policies.analyze")
    failed = False
    for doc in docs:
        must = mandatory(doc)
        failed = failed or bool(must)
        print(
            f"{doc['stack']}: {len(doc['violations'])} violation(s) ({len(doc['undetermined'])} undetermined), "
            f"{len(must)} mandatory, {len(doc['waived'])} waived -> {args.out / (doc['stack'] + '.json')}"
        )
        for kind in ("expired", "unused"):
            for w in doc["waivers"][kind]:
                print(f"  waiver #{w['id']} ({w['rule']} on {w['resources']}) is {kind}")
        for v in must[:20]:
            what = "UNDETERMINED" if v.get("undetermined") else "MANDATORY"
            print(f"  {what} {v['policy']} {v['urn'] or '(stack)'}: {v['message'].splitlines()[0]}")
        if len(must) > 20:
            print(f"  ... and {len(must) - 20} more (see the JSON)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
