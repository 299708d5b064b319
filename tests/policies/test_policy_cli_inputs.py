"""What a reviewer types at `python -m policies.analyze` and `python -m policies.report`, wrong: each mistake
is exit 2 with a message that names what to fix, before the pack starts and before anything is written (exit
1 would read as "mandatory violations found", exit 4 as a bug)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import pytest

from policies import analyze, report


def _plan(**change: Any) -> dict[str, Any]:
    return {**fx.aws_stack(), **change}


def _result_doc() -> dict[str, Any]:
    """A <stack>.json as the runner writes it: it has `stack`, `cloud` and `resources`, like a plan."""
    plan = fx.aws_stack()
    return {
        "schema": analyze.RESULT_SCHEMA,
        "stack": "dev",
        "cloud": "aws",
        "plan": "reports/plan/dev.json",
        "plan_sha256": "0" * 64,
        "violations": [],
        "waived": [],
        "policies": [],
        "resources": [
            {"urn": r["urn"], "type": r["type"], "name": r["name"], "source": None} for r in plan["resources"]
        ],
        "evaluated": {},
    }


_PREVIEW_JSON = {  # `pulumi preview --json`
    "config": {"aws:region": "eu-west-1"},
    "steps": [{"op": "create", "urn": "urn:pulumi:dev::eu-ml-platform::aws:s3/bucket:Bucket::data"}],
    "changeSummary": {"create": 1},
}
_STACK_EXPORT = {"version": 3, "deployment": {"manifest": {}, "resources": []}}  # `pulumi stack export`


def _write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _exit_code(main: Callable[[list[str]], int], argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as done:  # argparse's usage errors
        return int(done.code or 0)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        # was: "missing field 'stack'"
        (_PREVIEW_JSON, "looks like `pulumi preview --json` output, not a plan"),
        (_STACK_EXPORT, "looks like a `pulumi stack export` checkpoint, not a plan"),
        # was: analysed as a stack of resources with no inputs (a verdict, exit 1)
        (_result_doc(), "looks like a result of `python -m policies.analyze`"),
        # was: analysed with the region "None" and the environment "None" (here exit 0: a verdict)
        (_plan(region=None), "region=None must be a string"),
        (_plan(environment=None), "environment=None must be a string"),
        # was: analysed with no default provider for any resource (a verdict)
        (_plan(cloud="AWS"), "cloud='AWS' is not one of ['aws', 'gcp', 'azure']"),
        # was: exit 0, "0 violation(s)", and the stack read "pass" in the report: nothing had been judged
        (_plan(resources=[]), "the plan of stack 'dev' holds no resources, so no rule could judge anything"),
    ],
)
def test_a_json_file_that_is_no_plan_is_exit_2_naming_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], plan: Any, message: str
) -> None:
    path = _write(tmp_path / "plans" / "dev.json", plan)
    code = analyze.main([str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert not (tmp_path / "out").exists()


def test_report_over_the_results_folder_is_refused_and_keeps_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--plans reports/policy` for `--plans reports/plan`: the results were read as plans, analysed as stacks
    of empty resources and written over themselves."""
    result = _write(tmp_path / "reports" / "policy" / "dev.json", _result_doc())
    before = result.read_bytes()
    code = report.main(["--plans", str(result.parent), "--out", str(tmp_path / "reports"), "--no-checkov"])
    err = capsys.readouterr().err
    assert code == 2 and "looks like a result of `python -m policies.analyze`" in err, err
    assert result.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "reports").rglob("*")) == ["dev.json", "policy"]


def test_a_folder_given_as_a_plan_says_to_pass_its_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path / "plans" / "dev.json", fx.aws_stack())
    code = analyze.main([str(tmp_path / "plans"), "--out", str(tmp_path / "out")])  # was: "no such plan file"
    err = capsys.readouterr().err
    assert code == 2 and f"{tmp_path / 'plans'} is a folder; pass its plan files" in err, err


def test_one_plan_given_twice_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = _write(tmp_path / "dev.json", fx.aws_stack())
    code = analyze.main([str(plan), str(tmp_path / "." / "dev.json"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "is given twice; name each plan once" in err, err  # was: "both plans of stack 'dev'"


@pytest.mark.parametrize("prog", ["analyze", "report"])
@pytest.mark.parametrize("today", ["06/12/2026", "2026-13-01", "2026-02-30", "tomorrow"])
def test_today_that_is_not_a_date_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prog: str, today: str
) -> None:
    plan = _write(tmp_path / "plans" / "dev.json", fx.aws_stack())
    if prog == "analyze":
        code = _exit_code(analyze.main, [str(plan), "--out", str(tmp_path / "out"), "--today", today])
    else:
        code = _exit_code(
            report.main, ["--plans", str(plan.parent), "--out", str(tmp_path / "out"), "--today", today]
        )
    err = capsys.readouterr().err
    # was: "invalid fromisoformat value"
    assert code == 2 and f"argument --today: {today!r} is not a date YYYY-MM-DD" in err, err
    assert not (tmp_path / "out").exists()


def test_a_misspelt_policy_in_the_pack_config_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Pulumi CLI skips a config entry that names no policy: the allowed regions below were dropped with
    no word, and the run went on with the defaults (exit 1, a verdict)."""
    plan = _write(tmp_path / "dev.json", fx.aws_stack())
    config = _write(
        tmp_path / "config.json", {"all": "mandatory", "eu-data-residncy": {"allowedRegions": ["eu-west-1"]}}
    )
    code = analyze.main([str(plan), "--out", str(tmp_path / "out"), "--config", str(config)])
    err = capsys.readouterr().err
    assert code == 2 and "'eu-data-residncy' (did you mean 'eu-data-residency'?) is not a policy" in err, err
    assert not (tmp_path / "out").exists()


def test_a_missing_waivers_file_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: exit 2, but only after creating the --out folder (report: <out>/policy)."""
    _write(tmp_path / "plans" / "dev.json", fx.aws_stack())
    missing = tmp_path / "waivers.yaml"
    args = ["--plans", str(tmp_path / "plans"), "--out", str(tmp_path / "out"), "--no-checkov"]
    code = report.main([*args, "--waivers", str(missing)])
    err = capsys.readouterr().err
    assert code == 2 and f"{missing}: no such waivers file (check --waivers)" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        ("empty", "--plans {plans}: no plan files (*.json)"),
        ("missing", "--plans {plans}: no such folder"),
        ("file", "--plans {plans} is a file; name the folder"),  # was: "no plan files"
        ("out-file", "--out {out} is a file; name a folder for the reports"),  # was: named <out>/policy
    ],
)
def test_report_folders_that_cannot_be_used_are_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: str, message: str
) -> None:
    plans, out = tmp_path / "plans", tmp_path / "out"
    if make == "empty":
        plans.mkdir()
    elif make == "file":
        _write(plans, fx.aws_stack())
    elif make == "out-file":
        _write(plans / "dev.json", fx.aws_stack())
        out.write_text("someone's notes\n")
    code = report.main(["--plans", str(plans), "--out", str(out), "--no-checkov"])
    err = capsys.readouterr().err
    assert code == 2 and message.format(plans=plans, out=out) in err, err
    assert "Traceback" not in err
    assert not out.exists() or out.read_text() == "someone's notes\n"
