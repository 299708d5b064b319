"""Plan files whose name and content disagree, and `--plans` entries that are not plan files: the result of a
stack the reviewer named went missing in silence (and its previous result was removed as stale)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import policy_fixtures as fx
import pytest

from policies import analyze, report

REPO = Path(__file__).resolve().parents[2]


def _write(path: Path, doc: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_project_stacks_are_the_committed_stack_files(tmp_path: Path) -> None:
    assert {"dev", "prod", "staging", "gcp-dev", "azure-dev"} <= analyze.project_stacks(REPO)
    (tmp_path / "Pulumi.qa.yaml").write_text("config: {}\n")
    assert analyze.project_stacks(tmp_path) == set(), "no Pulumi.yaml: not a project"
    (tmp_path / "Pulumi.yaml").write_text("name: p\nruntime: python\n")
    assert analyze.project_stacks(tmp_path) == {"qa"}


@pytest.mark.parametrize("prog", ["analyze", "report"])
def test_a_plan_named_after_another_stack_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, prog: str
) -> None:
    """`cp reports/plan/dev.json reports/plan/prod.json`: analysed as "dev", written to dev.json; prod had no
    result, and the exit status said nothing of it."""
    monkeypatch.chdir(REPO)  # the project (Pulumi.prod.yaml) is where the pack sits and where make runs
    plan = _write(tmp_path / "plans" / "prod.json", fx.aws_stack("dev", "dev"))
    out = tmp_path / "out"
    if prog == "analyze":
        code = analyze.main([str(plan), "--out", str(out / "policy")])
    else:
        code = report.main(["--plans", str(plan.parent), "--out", str(out), "--no-checkov"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{plan} holds the plan of stack 'dev', not of stack 'prod' (Pulumi.prod.yaml)" in err, err
    assert "python -m infra.plan --stack prod" in err, err
    assert not out.exists(), "bad input writes nothing"


def test_a_plan_under_another_name_is_analysed_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """plan.json, a test's good.json: not a stack of the project, so no result is hidden; the runner says
    where the result goes (the pack is not needed to see that: it is said before the pack starts)."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("POLICY_PACK_PYTHON", str(tmp_path / "no-such-python"))
    plan = _write(tmp_path / "plan.json", fx.aws_stack("dev", "dev"))
    code = analyze.main([str(plan), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 3, err  # the missing pack: the name alone stopped nothing
    assert f"note: {plan} holds the plan of stack 'dev': its result is {tmp_path / 'out' / 'dev.json'}" in err


def test_a_plan_named_after_its_stack_gets_no_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POLICY_PACK_PYTHON", str(tmp_path / "no-such-python"))
    plan = _write(tmp_path / "prod.json", fx.aws_stack("prod", "prod"))
    assert analyze.main([str(plan), "--out", str(tmp_path / "out")]) == 3
    assert "note:" not in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["folder", "dangling-link", "fifo"])
def test_report_refuses_a_plan_entry_that_is_not_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """`python -m infra.plan --out reports/plan/prod.json` makes a folder prod.json (holding prod.json): `report
    --plans reports/plan` skipped it, reported the other stacks as if they were all, and removed prod's
    previous result as stale."""
    plans, out = tmp_path / "plans", tmp_path / "out"
    _write(plans / "dev.json", fx.aws_stack())
    odd = plans / "prod.json"
    if kind == "folder":
        _write(odd / "prod.json", fx.aws_stack("prod", "prod"))
        expected = "prod.json is a folder (holding prod.json)"
    elif kind == "dangling-link":
        odd.symlink_to(tmp_path / "gone.json")
        expected = f"prod.json is a link to {tmp_path / 'gone.json'}, which does not exist"
    else:
        os.mkfifo(odd)
        expected = "prod.json is not a regular file"
    _write(out / "policy" / "prod.json", {"stack": "prod"})  # the previous run's result: must stay
    code = report.main(["--plans", str(plans), "--out", str(out), "--no-checkov"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--plans {plans}: {expected}. Each *.json there is read as one stack's plan" in err, err
    assert sorted(p.name for p in out.rglob("*")) == ["policy", "prod.json"]
