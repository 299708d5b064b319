"""Runs of different stacks into one --out (one CI job per stack on one runner, a check of one stack after a
change): each run deleted the other stacks' results as stale. A result stays while the plan it judged is
unchanged; it goes when that plan changed or is gone, when its stack left the project, or when a run over a
whole --plans folder has no plan of it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import pytest
from policy_cli import run_cli

from policies import analyze
from policies.client import StackResult
from policies.results import prune_stale_results


def _write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.integration
def test_runs_of_single_stacks_into_one_folder_keep_each_others_current_results(
    tmp_path: Path, pack_python: Path
) -> None:
    """As a CI job per stack runs it, from a checkout, with the paths of the README."""
    env = {"POLICY_PACK_PYTHON": str(pack_python)}
    for stack in ("dev", "prod", "staging"):
        _write(tmp_path / "reports/plan" / f"{stack}.json", fx.aws_stack(stack, stack))
    out = tmp_path / "reports/policy"

    def analyze_cli(stack: str) -> str:
        proc = run_cli(
            "policies.analyze", f"reports/plan/{stack}.json", "--out", "reports/policy", env=env, cwd=tmp_path
        )
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        return proc.stderr

    analyze_cli("dev")
    dev_result = (out / "dev.json").read_text()
    err = analyze_cli("prod")
    assert sorted(p.name for p in out.iterdir()) == ["dev.json", "prod.json"], err
    assert (out / "dev.json").read_text() == dev_result
    plan = tmp_path / "reports/plan/dev.json"
    assert f"kept reports/policy/dev.json: stack dev was not in this run; its plan {plan} is unchanged" in err
    assert "removed" not in err
    doc = json.loads(dev_result)
    assert (doc["plan"], doc["plan_file"]) == ("reports/plan/dev.json", str(plan))
    assert doc["plan_sha256"] == hashlib.sha256(plan.read_bytes()).hexdigest()

    # dev's plan changes (infra edited, `make plan` again), prod's goes: both results are stale now.
    _write(plan, fx.aws_stack("dev", "staging"))
    (tmp_path / "reports/plan/prod.json").unlink()
    err = analyze_cli("staging")
    assert sorted(p.name for p in out.iterdir()) == ["staging.json"], err
    assert (
        f"removed reports/policy/dev.json: stack dev was not in this run and its plan {plan} changed" in err
    )
    assert (
        "removed reports/policy/prod.json: stack prod was not in this run and its plan reports/plan/prod.json is gone"
        in err
    )


@pytest.mark.integration
def test_report_over_a_plans_folder_removes_results_of_stacks_it_has_no_plan_of(
    tmp_path: Path, pack_python: Path
) -> None:
    """`make policy` reads every plan of the folder: a stack with no plan there is not current, even if the
    plan its result judged is still, unchanged, elsewhere."""
    env = {"POLICY_PACK_PYTHON": str(pack_python)}
    plans, out = tmp_path / "plans", tmp_path / "reports"
    _write(plans / "dev.json", fx.aws_stack())
    elsewhere = _write(tmp_path / "prod.json", fx.aws_stack("prod", "prod"))
    first = run_cli("policies.analyze", str(elsewhere), "--out", str(out / "policy"), env=env)
    assert first.returncode in (0, 1), first.stderr
    proc = run_cli("policies.report", "--plans", str(plans), "--out", str(out), "--no-checkov", env=env)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert sorted(p.name for p in (out / "policy").glob("*.json")) == ["dev.json"]
    assert (
        f"removed {out / 'policy/prod.json'}: stack prod was not in this run (its result was stale: "
        f"--plans {plans} holds no plan of it)"
    ) in proc.stderr


# --- the rule, without the pack ------------------------------------------------------------------------------


def _result(out: Path, stack: str, plan: Path | str, *, plan_file: str | None = None, sha: str = "") -> Path:
    """A result as the runner writes it (`plan_file` None: as written before it was recorded)."""
    doc: dict[str, Any] = {
        "schema": analyze.RESULT_SCHEMA,
        "stack": stack,
        "plan": str(plan),
        "plan_sha256": sha,
        "violations": [],
        "waived": [],
        "policies": [],
        "evaluated": {},
    }
    if plan_file is not None:
        doc["plan_file"] = plan_file
    return _write(out / f"{stack}.json", doc)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_result_without_plan_file_finds_its_relative_plan_as_the_promotion_gate_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Results written before `plan_file` name the plan as given, relative to the folder the run was in: the
    result's own folders are looked in, nearest first. `prod.json` relative to --out itself is the result,
    never its plan."""
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # not where the runs were
    out = tmp_path / "checkout/reports/policy"
    plan = _write(tmp_path / "checkout/reports/plan/prod.json", fx.aws_stack("prod", "prod"))
    kept = _result(out, "prod", "reports/plan/prod.json", sha=_sha(plan))
    beside = _write(tmp_path / "checkout/reports/staging.json", fx.aws_stack("staging", "staging"))
    _result(out, "staging", "staging.json", sha=_sha(beside))  # run in reports/: not out/staging.json
    changed = _write(tmp_path / "checkout/reports/plan/gcp-dev.json", fx.aws_stack("gcp-dev", "dev"))
    _result(out, "gcp-dev", "reports/plan/gcp-dev.json", sha="0" * 64)
    removed = prune_stale_results(out, ["dev"], project={"dev", "prod", "staging", "gcp-dev"})
    err = capsys.readouterr().err
    assert removed == [out / "gcp-dev.json"], err
    assert f"kept {kept}: stack prod was not in this run; its plan {plan} is unchanged" in err
    assert f"its plan {changed} changed since it was analysed" in err
    assert (out / "staging.json").exists()


@pytest.mark.parametrize(
    ("stacks", "record", "expected"),
    [
        # Pulumi.retired.yaml is gone: the stack left the project, its result goes whatever its plan says.
        (["dev"], {}, "it is not a stack of the project (no Pulumi.retired.yaml)"),
        # A run over another project's plans says nothing of which stacks this project has.
        (["someone-elses"], {}, None),
        # Nothing to compare with (a plan read from a pipe): it cannot be shown current, so it goes.
        (
            ["dev"],
            {"sha": "", "project": "dev retired"},
            "its result records no plan_sha256 to compare its plan with",
        ),
    ],
)
def test_results_the_run_cannot_show_current_go(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stacks: list[str],
    record: dict[str, str],
    expected: str | None,
) -> None:
    out = tmp_path / "out"
    plan = _write(tmp_path / "retired.json", fx.aws_stack("retired", "dev"))
    result = _result(out, "retired", plan, plan_file=str(plan), sha=record.get("sha", _sha(plan)))
    prune_stale_results(out, stacks, project=record.get("project", "dev prod").split())
    err = capsys.readouterr().err
    if expected is None:
        assert result.exists() and f"kept {result}" in err, err
    else:
        assert not result.exists()
        assert f"removed {result}: stack retired was not in this run and {expected}" in err


def test_the_recorded_hash_is_of_the_plan_judged_not_of_the_file_after_the_run(tmp_path: Path) -> None:
    """The file was hashed after the pack ran: a plan rewritten meanwhile (`make plan` beside the gate) gave the
    result the new plan's hash, and a later run kept it as current though it judged the old one."""
    path = _write(tmp_path / "dev.json", fx.aws_stack())
    judged = _sha(path)
    plan = analyze.load_plan(path)
    _write(path, fx.aws_stack("dev", "prod"))  # re-rendered while the pack was running
    result = StackResult(stack="dev", pack={}, policies=[])
    (tmp_path / "out").mkdir()
    doc = analyze.write_result(plan, result, tmp_path / "out", [], analyze.dt.date(2026, 12, 2))
    assert doc["plan_sha256"] == judged != _sha(path)
