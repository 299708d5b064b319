"""The README's two commands from the outside: the Makefile's targets and `.ci/run`, on a fresh machine.

The Makefile runs in a scratch copy whose environments are marked built (stamp files newer than their
locks), so `make -n` shows what a target would run without installing anything; `.ci/run` runs for real
against a stand-in Makefile and stand-in dpkg/apt-get on a PATH of its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ("requirements/lock.txt", "requirements/torch-cpu.lock.txt", "requirements/policies.lock.txt",
         "requirements/checkov.lock.txt", "tools/npm/package-lock.json")  # fmt: skip
VENV_STAMPS = (".venv/.installed", "policies/.venv/.installed", ".venvs/checkov/.installed")


def _scratch_make(tmp_path: Path) -> Path:
    """A copy of the Makefile whose three virtualenvs are built and whose node tools are not (no npm)."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    old = time.time() - 3600
    for name in LOCKS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
        os.utime(tmp_path / name, (old, old))
    for name in VENV_STAMPS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    return tmp_path


def _dry_run(root: Path, target: str) -> list[str]:
    result = subprocess.run(["make", "-n", target], cwd=root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("target", ["demo", "demo-fast", "plan", "policy", "lint", "images"])
def test_targets_other_than_test_do_not_need_npm(tmp_path: Path, target: str) -> None:
    """README: a fresh machine needs Python 3.11, make and two Debian packages for `make demo`. It stopped at
    `npm ci` (node test tools: Azurite, the SARIF validator) before the demo's first stage."""
    lines = _dry_run(_scratch_make(tmp_path), target)
    assert not [line for line in lines if "npm" in line], lines
    assert [line for line in _dry_run(tmp_path, "test") if "npm ci" in line], (
        "make test installs the node tools"
    )


def test_bench_renders_the_plans_the_policy_benchmark_reads(tmp_path: Path) -> None:
    """benchmarks.policy reads reports/plan, which benchmarks.plan does not write (it renders into a temporary
    folder): on a fresh clone `make bench` stopped with "no plans in reports/plan"."""
    lines = _dry_run(_scratch_make(tmp_path), "bench")
    index = {name: next((i for i, line in enumerate(lines) if name in line), None)
             for name in ("-m infra.plan --out reports/plan", "-m benchmarks.policy")}  # fmt: skip
    assert None not in index.values(), lines
    assert index["-m infra.plan --out reports/plan"] < index["-m benchmarks.policy"], lines


def test_lock_builds_the_venv_whose_uv_it_runs(tmp_path: Path) -> None:
    """`make lock` runs .venv/bin/uv: on a fresh clone it stopped with "No such file or directory"."""
    root = _scratch_make(tmp_path)
    (root / ".venv" / ".installed").unlink()
    lines = _dry_run(root, "lock")
    venv = next((i for i, line in enumerate(lines) if "-m venv .venv" in line), None)
    uv = next(i for i, line in enumerate(lines) if ".venv/bin/uv pip compile" in line)
    assert venv is not None and venv < uv, lines


def test_clean_keeps_the_committed_benchmark_results(tmp_path: Path) -> None:
    """reports/ is git-ignored, yet reports/bench/{serve,tune,monitoring}.json are committed (the READMEs cite
    them): `make clean` (rm -rf reports) deleted them from the working tree."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / ".gitignore").write_text("reports/\n")
    (tmp_path / "reports" / "bench").mkdir(parents=True)
    (tmp_path / "reports" / "demo").mkdir()
    committed, generated = tmp_path / "reports/bench/serve.json", tmp_path / "reports/bench/demo.json"
    committed.write_text("{}")
    git = ["git", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "-f", "reports/bench/serve.json"], cwd=tmp_path, check=True)
    generated.write_text("{}")
    (tmp_path / "reports/demo/summary.json").write_text("{}")
    result = subprocess.run(["make", "clean"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert committed.exists(), "make clean deleted a committed file"
    assert not generated.exists() and not (tmp_path / "reports/demo").exists()


# --- .ci/run ---------------------------------------------------------------------------------------------
STAND_IN_MAKEFILE = """
setup:
\t@echo setup ran
test:
\t@$(PYTHON_BIN) tests.py
"""
TESTS_PY = """
import os, pathlib, sys, time
pathlib.Path("tests.pid").write_text(str(os.getpid()))
outcome = os.environ["STAND_IN_TESTS"]
if outcome == "hang":
    try:
        time.sleep(120)
    except KeyboardInterrupt:
        pathlib.Path("torn-down").write_text("fixtures torn down")
        sys.exit(2)
sys.exit(int(outcome))
"""


def _ci(tmp_path: Path, outcome: str, *, npm: bool = True, ensurepip: bool = True) -> subprocess.Popen[str]:
    """.ci/run in a scratch tree: dpkg says every package is installed, apt-get records what it was asked."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "Makefile").write_text(STAND_IN_MAKEFILE)
    (tmp_path / "tests.py").write_text(TESTS_PY)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "make", "dirname", "date", "echo", "sleep"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    stand_ins = {"dpkg": "exit 0", "apt-get": f'echo "$*" >> {tmp_path}/apt-get.log'}
    if npm:
        stand_ins["npm"] = "exit 0"
    # python3 as Debian's is without its python3-venv package: no ensurepip, so `python3 -m venv` fails.
    stand_ins["python3"] = f'exec {sys.executable} "$@"' if ensurepip else "exit 1"
    for name, body in stand_ins.items():
        (bin_dir / name).write_text(f"#!{shutil.which('bash')}\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {
        "PATH": str(bin_dir),
        "STAND_IN_TESTS": outcome,
        "PYTHON_BIN": sys.executable,
        "HOME": str(tmp_path),
    }
    return subprocess.Popen(
        [shutil.which("bash"), str(tmp_path / ".ci" / "run")], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        # As a CI runner starts it: SIGINT not ignored (it would be, inherited, under a backgrounded shell).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip


@pytest.mark.parametrize("outcome", ["0", "1", "5"])
def test_ci_run_fails_when_the_tests_fail(tmp_path: Path, outcome: str) -> None:
    """pytest 1 (failures) and 5 (no test collected) fail the run (make reports either as 2)."""
    proc = _ci(tmp_path, outcome)
    out, _ = proc.communicate(timeout=60)
    assert "setup ran" in out
    assert (proc.returncode == 0) == (outcome == "0"), (proc.returncode, out)


@pytest.mark.parametrize("missing", ["npm", "python3-venv"])
def test_ci_run_installs_what_make_setup_needs(tmp_path: Path, missing: str) -> None:
    """`make setup` runs `npm ci` and `python3 -m venv`; .ci/run installed every other system package the
    tests need, but not npm, nor Debian's python3-venv (without it venv cannot bootstrap pip)."""
    proc = _ci(tmp_path, "0", npm=missing != "npm", ensurepip=missing != "python3-venv")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    log = (tmp_path / "apt-get.log").read_text().splitlines()
    installs = [line for line in log if line.startswith("install")]
    assert installs and installs[0].split()[-1] == missing, installs


def test_ci_run_installs_nothing_that_is_there(tmp_path: Path) -> None:
    proc = _ci(tmp_path, "0")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and not (tmp_path / "apt-get.log").exists(), out


def test_cancelling_ci_run_stops_the_tests_it_started(tmp_path: Path) -> None:
    """SIGTERM to .ci/run (a cancelled CI job) killed only the shell: make and pytest ran on, orphaned, to the
    end of the suite. Now the tests get SIGINT (pytest's orderly stop) and .ci/run waits for them."""
    proc = _ci(tmp_path, "hang")
    pid_file = tmp_path / "tests.pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.exists(), proc.communicate(timeout=10)[0]
    tests_pid = int(pid_file.read_text())
    try:
        proc.send_signal(signal.SIGTERM)  # to the script only, as a runner cancelling its step does
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode != 0, out
        assert (tmp_path / "torn-down").exists(), f"the tests were not stopped in order:\n{out}"
        time.sleep(0.2)
        assert not Path(f"/proc/{tests_pid}").exists(), "the tests outlived .ci/run"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(tests_pid, signal.SIGKILL)


@pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="shellcheck not installed: apt-get install -y shellcheck"
)
def test_ci_run_passes_shellcheck() -> None:
    """A comment line starting `# shellcheck:` was read as a (broken) directive: SC1073, and no other check ran."""
    result = subprocess.run(
        ["shellcheck", str(ROOT / ".ci" / "run")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout


def test_setup_with_another_python_says_which_one_it_needs(tmp_path: Path) -> None:
    """The locks are resolved for Python 3.11: with another python3 (Ubuntu 24.04: 3.12) `make setup` made the
    virtualenvs and failed deep inside pip. It now stops first, naming the version and the PYTHON= fix."""
    root = _scratch_make(tmp_path)
    for name in VENV_STAMPS:
        (root / name).unlink()
    fake = tmp_path / "python3.12"
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = -c ]; then echo 3.12; exit 0; fi\necho "fake python: $*" >&2\nexit 0\n'
    )
    fake.chmod(0o755)
    result = subprocess.run(["make", "setup", f"PYTHON={fake}"], cwd=root, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert result.returncode != 0
    assert "is Python 3.12; the locks are resolved for Python 3.11" in result.stderr
    assert "PYTHON=python3.11" in result.stderr
    assert "fake python: -m venv" not in result.stderr  # stopped before making any virtualenv
