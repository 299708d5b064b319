"""What the runner and the report leave behind for their readers (the promotion gate, the demo, a reviewer): only
this run's results, each file whole, and no pack process once the runner is gone, however it went."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import psutil
import pytest
from test_policy_cli_robustness import pack_stderr_file, runner_with_serving_pack

REPO = Path(__file__).resolve().parents[2]
REPORTS = ("compliance.md", "compliance.html", "policy.sarif", "policy-junit.xml")


def _run(module: str, *args: str, pack_python: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env={**os.environ, "POLICY_PACK_PYTHON": str(pack_python)},
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
        **kwargs,
    )


@pytest.mark.integration
def test_a_run_over_fewer_stacks_removes_only_its_own_stale_results(
    tmp_path: Path, pack_python: Path
) -> None:
    """A run over dev alone left an earlier run's prod.json beside it, which the promotion gate of prod and the
    demo read as current, though its plan had changed since. Files the runner did not write stay."""
    plan, out = tmp_path / "dev.json", tmp_path / "out"
    plan.write_text(json.dumps(fx.aws_stack()))
    first = _run("policies.analyze", str(plan), "--out", str(out), pack_python=pack_python)
    assert first.returncode in (0, 1), first.stderr
    dev = json.loads((out / "dev.json").read_text())
    # An earlier run's results whose plans changed since (prod) or are gone (staging): stale.
    prod_plan = tmp_path / "prod.json"
    prod_plan.write_text(json.dumps(fx.aws_stack("prod", "prod")))
    stale = {"plan": str(prod_plan), "plan_file": str(prod_plan), "plan_sha256": "0" * 64}
    (out / "prod.json").write_text(json.dumps({**dev, "stack": "prod", **stale}))
    legacy = {k: v for k, v in dev.items() if k not in ("schema", "plan_file")}  # before the marker existed
    gone = {"plan": str(tmp_path / "staging.json")}
    (out / "staging.json").write_text(json.dumps({**legacy, "stack": "staging", **gone}))
    foreign = {
        "notes.json": '{"stack": "notes"}',  # not a result: lacks what the runner writes
        "other.json": json.dumps({**dev, "stack": "someone-else"}),  # its stack is not its name
        "broken.json": "{",
    }
    for name, text in foreign.items():
        (out / name).write_text(text)

    again = _run("policies.analyze", str(plan), "--out", str(out), pack_python=pack_python)
    assert again.returncode == first.returncode, again.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(["dev.json", *foreign])
    assert {n: (out / n).read_text() for n in foreign} == foreign
    assert (
        f"removed {out / 'prod.json'}: stack prod was not in this run and its plan {prod_plan} changed since "
        "it was analysed (plan_sha256 differs)"
    ) in again.stderr
    assert (
        f"removed {out / 'staging.json'}: stack staging was not in this run and its plan "
        f"{tmp_path / 'staging.json'} is gone"
    ) in again.stderr
    assert json.loads((out / "dev.json").read_text())["schema"] == "policies.analyze/stack-result-v1"


@pytest.mark.integration
def test_a_failed_report_write_keeps_the_previous_report_whole(tmp_path: Path, pack_python: Path) -> None:
    """compliance.md/html, the SARIF and the JUnit XML were rewritten in place: a full disk (here: a file size
    limit) left a truncated compliance.html, exit 4 with a traceback. The previous file must stay whole."""
    plans, out = tmp_path / "plans", tmp_path / "reports"
    plans.mkdir()
    (plans / "dev.json").write_text(json.dumps(fx.aws_stack()))
    args = ("--plans", str(plans), "--out", str(out), "--no-checkov")
    first = _run("policies.report", *args, pack_python=pack_python)
    assert first.returncode in (0, 1), first.stderr
    before = {name: (out / name).read_bytes() for name in REPORTS}
    limit = len(before["compliance.html"]) - 1000
    smaller = [out / "policy" / "dev.json", *(out / n for n in REPORTS if n != "compliance.html")]
    assert all(p.stat().st_size < limit for p in smaller)  # only the HTML hits the limit

    def small_disk() -> None:  # Python ignores SIGXFSZ, so the write fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    again = _run("policies.report", *args, pack_python=pack_python, preexec_fn=small_disk)
    assert again.returncode == 2, again.stdout + again.stderr
    assert f"{out / 'compliance.html'}: cannot write the report" in again.stderr
    assert "Traceback" not in again.stderr
    assert (out / "compliance.html").read_bytes() == before["compliance.html"]
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


@pytest.mark.integration
def test_sigkill_of_the_runner_takes_the_pack_with_it(tmp_path: Path, pack_python: Path) -> None:
    """SIGKILL (the OOM killer, `kill -9`, a CI runner's hard stop) runs no cleanup: the pack, a gRPC server
    that blocks until killed, was left running under init, and its stderr file, which the runner removed in a
    `finally` that never ran, stayed in the temp folder for ever."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    with runner_with_serving_pack(tmp_path, pack_python, TMPDIR=str(temp)) as (runner, pack):
        stderr_file = pack_stderr_file(pack)
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=30)
        gone, _ = psutil.wait_procs([pack], timeout=5)
        assert gone, f"the pack process {pack.pid} outlived the SIGKILLed runner"
    assert not stderr_file.exists(), f"{stderr_file} was left behind by the SIGKILLed runner"
    assert not list(temp.iterdir()), "the SIGKILLed runner left files in its temp folder"
