"""`python -m policies.analyze` as CI and the demo call it (a subprocess), given what a hostile day brings:
bad plans and waivers files, an unusable --out, a full disk, SIGTERM. Exit 1 means "a mandatory
violation" to every caller (the demo accepts it and reads the results), so bad input must be exit 2 and
must never touch the results other parts already read."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import policy_fixtures as fx
import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]


def _env(pack_python: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if pack_python is not None:
        env["POLICY_PACK_PYTHON"] = str(pack_python)
    return env


def _cli(*args: str, pack_python: Path | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "policies.analyze", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=_env(pack_python),
        timeout=120,
        check=False,
        **kwargs,
    )


def _plan(**change: Any) -> dict[str, Any]:
    plan = fx.aws_stack()
    plan.update(change)
    return plan


def _with_resource_field(key: str, value: Any) -> dict[str, Any]:
    plan = fx.aws_stack()
    plan["resources"][1][key] = value
    return plan


@pytest.mark.parametrize(
    ("content", "message"),
    [
        # was: UnicodeDecodeError traceback, exit 1 (read as "mandatory violation")
        (b'\xff\xfe{"stack": "dev"}', "cannot read the plan"),
        # was: the pack failed to serialize NaN mid-run, exit 3 ("run make setup")
        (
            json.dumps(_with_resource_field("inputs", {"size": float("nan")})).encode(),
            "NaN is not a JSON value",
        ),
        # was: the result written to <out>/../escape.json, outside --out
        (json.dumps(_plan(stack="../escape")).encode(), "is not a stack name"),
        # was: FileNotFoundError after the whole analysis, exit 1
        (json.dumps(_plan(stack="team/dev")).encode(), "is not a stack name"),
        # was: TypeError while building the Analyze request, exit 1
        (json.dumps(_with_resource_field("parent", 5)).encode(), "resources[1].parent must be a URN string"),
        (json.dumps(_with_resource_field("dependencies", 5)).encode(), "resources[1].dependencies must be"),
    ],
)
def test_a_malformed_plan_is_exit_2_naming_the_fix(tmp_path: Path, content: bytes, message: str) -> None:
    plan, out = tmp_path / "plans" / "dev.json", tmp_path / "plans" / "out"
    plan.parent.mkdir()
    plan.write_bytes(content)
    proc = _cli(str(plan), "--out", str(out))
    assert proc.returncode == 2 and message in proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["dev.json", "plans"]  # nothing written anywhere


def test_two_plans_of_one_stack_are_refused(tmp_path: Path) -> None:
    """Both would be written to <out>/dev.json: the first result was silently replaced (exit 0)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for folder in ("a", "b"):
        (tmp_path / folder / "dev.json").write_text(json.dumps(fx.aws_stack()))
    proc = _cli(str(tmp_path / "a/dev.json"), str(tmp_path / "b/dev.json"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "both plans of stack 'dev'" in proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / "out").exists()


def test_out_that_is_a_file_is_exit_2_before_the_analysis(tmp_path: Path) -> None:
    plan, out = tmp_path / "dev.json", tmp_path / "results"
    plan.write_text(json.dumps(fx.aws_stack()))
    out.write_text("someone's notes\n")
    proc = _cli(str(plan), "--out", str(out))  # was: FileExistsError after the whole analysis, exit 1
    assert proc.returncode == 2 and "is a file" in proc.stderr, proc.stdout + proc.stderr
    assert out.read_text() == "someone's notes\n"


_WAIVER = """waivers:
  - rule: iam-no-wildcards
    finding: undetermined
    stacks: [dev]
    resources: ["mlp-*-identities-*-key"]
    justification: the key ARN is unknown at preview
    approver: ENS security officer <ens-officer@example.eu>
    expires: {expires}
"""


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("impossible-date", "waiver #1: expires='2026-02-30' is not a date"),  # was: bare ValueError, exit 1
        ("latin-1", "cannot read the waivers file"),  # was: UnicodeDecodeError, exit 1
        ("directory", "cannot read the waivers file"),  # was: IsADirectoryError, exit 1
    ],
)
def test_an_unreadable_waivers_file_is_exit_2_naming_it(tmp_path: Path, kind: str, message: str) -> None:
    plan, waivers = tmp_path / "dev.json", tmp_path / "waivers.yaml"
    plan.write_text(json.dumps(fx.aws_stack()))
    if kind == "impossible-date":
        waivers.write_text(_WAIVER.format(expires="2026-02-30"))
    elif kind == "latin-1":
        waivers.write_bytes(_WAIVER.format(expires="2026-06-30").replace("ENS", "Jos\xe9").encode("latin-1"))
    else:
        waivers.mkdir()
    proc = _cli(str(plan), "--out", str(tmp_path / "out"), "--waivers", str(waivers))
    assert proc.returncode == 2 and message in proc.stderr and str(waivers) in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.integration
def test_a_failed_write_keeps_the_previous_result(tmp_path: Path, pack_python: Path) -> None:
    """A full disk (here: a file size limit) while writing <stack>.json truncated the result the promotion
    gate reads, and exited 1 with a traceback; the previous complete result must stay."""
    plan, out = tmp_path / "dev.json", tmp_path / "out"
    plan.write_text(json.dumps(fx.aws_stack()))
    first = _cli(str(plan), "--out", str(out), pack_python=pack_python)
    assert first.returncode in (0, 1), first.stderr
    before = (out / "dev.json").read_bytes()
    limit = len(before) // 2

    def small_disk() -> None:  # Python ignores SIGXFSZ, so the write fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    again = _cli(str(plan), "--out", str(out), pack_python=pack_python, preexec_fn=small_disk)
    assert again.returncode == 2 and "cannot write the result of stack dev" in again.stderr, again.stderr
    assert (out / "dev.json").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["dev.json"]  # no temporary file left


def _serving_pack(runner: psutil.Process, timeout_s: float = 60.0) -> psutil.Process:
    """The runner's pack process once it listens (has printed its port): a pack still starting dies of
    the closed pipe on its own when the runner goes, which is not the case under test."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in runner.children():
            try:
                if "pulumi.policy" in " ".join(child.cmdline()) and any(
                    c.status == psutil.CONN_LISTEN for c in child.net_connections("tcp")
                ):
                    return child
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)
    raise AssertionError("the runner never started a listening pack process")


@contextlib.contextmanager
def runner_with_serving_pack(
    tmp_path: Path, pack_python: Path, **env: str
) -> Iterator[tuple[subprocess.Popen[bytes], psutil.Process]]:
    """`policies.analyze` on several stacks (so that a signal lands while a pack is up), caught with its pack
    listening; whatever the test leaves running is killed after it. `env` adds to the runner's environment."""
    plans = []
    for n in range(4):
        path = tmp_path / f"s{n}.json"
        path.write_text(json.dumps(fx.aws_stack(f"s{n}")))
        plans.append(str(path))
    runner = subprocess.Popen(
        [sys.executable, "-m", "policies.analyze", *plans, "--out", str(tmp_path / "out")],
        cwd=REPO,
        env={**_env(pack_python), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pack = None
    try:
        pack = _serving_pack(psutil.Process(runner.pid))
        yield runner, pack
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        if pack is not None and pack.is_running():
            pack.kill()


@pytest.mark.integration
def pack_stderr_file(pack: psutil.Process) -> Path:
    """Where the pack's stderr lives in the file system (`/proc` marks a file with no name left `(deleted)`)."""
    return Path(os.readlink(f"/proc/{pack.pid}/fd/2").removesuffix(" (deleted)"))


def test_sigterm_stops_the_pack_and_exits_143(tmp_path: Path, pack_python: Path) -> None:
    """`timeout`, a CI cancel or a supervisor sends SIGTERM to the runner alone: the pack (a gRPC server
    that blocks until killed) was left running under init, with its stderr file in the temp folder."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    with runner_with_serving_pack(tmp_path, pack_python, TMPDIR=str(temp)) as (runner, pack):
        stderr_file = pack_stderr_file(pack)
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=30)
        assert runner.returncode == -signal.SIGTERM  # the conventional "killed by SIGTERM" (shell: 143)
        gone, _ = psutil.wait_procs([pack], timeout=5)
        assert gone, f"the pack process {pack.pid} outlived the runner"
        assert not stderr_file.exists(), f"{stderr_file} was left behind"
        assert not list(temp.iterdir()), "the runner left files in its temp folder"
        for result in (tmp_path / "out").glob("*"):  # whatever was written is complete
            assert result.suffix == ".json" and json.loads(result.read_text())["stack"] == result.stem


@pytest.mark.parametrize("prog", ["analyze", "report"])
def test_a_crash_inside_the_analysis_is_exit_4_not_a_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], prog: str
) -> None:
    """A bug mid-analysis exited 1 (Python's default), the code for "mandatory violations found", which the demo
    accepts before it reads the results folder (perhaps an earlier run's files)."""
    from policies import analyze, report

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a rule's bug")

    monkeypatch.setattr(analyze, "analyze_plan", broken)
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "dev.json").write_text(json.dumps(fx.aws_stack()))
    if prog == "analyze":
        code = analyze.main([str(plans / "dev.json"), "--out", str(tmp_path / "out")])
    else:
        code = report.main(["--plans", str(plans), "--out", str(tmp_path / "out"), "--no-checkov"])
    err = capsys.readouterr().err
    assert code == analyze.EXIT_INTERNAL == 4, err
    assert "a rule's bug" in err and "not a verdict" in err
    assert not list((tmp_path / "out").glob("**/dev.json"))
