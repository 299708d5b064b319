"""Nothing a deploy or smoke command started outlives it: its whole process group is stopped.

Only the direct child was killed (subprocess.run's kill on a timeout, on Ctrl-C, on the CLI's SIGTERM), so what a
script had started, `kubectl port-forward &`, a `pulumi up` under a wrapper, a `sleep` here, ran on orphaned,
still carrying the promotion's lock id (no takeover of the lock while it ran) and changing the environment after
the promotion had given up. Each command is a real shell; its `sleep` is found by a marker in its environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from localservers import stop_group
from promotion.deploy import CommandDeployer, DeployError

REPO = Path(__file__).resolve().parents[2]
MARKER = "PROMOTION_TEST_DEPLOY_MARKER"


def _marked(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(MARKER) == marker:
                found.append(proc)
    return found


def _sleeps(marker: str) -> list[str]:
    """The live `sleep`s carrying `marker` (a grace for the kernel to finish what was already killed)."""
    deadline = time.monotonic() + 2
    while (left := [p for p in _marked(marker) if p.name() == "sleep"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [f"pid {p.pid}: {' '.join(p.cmdline())}" for p in left]


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, value)
    try:
        yield value
    finally:  # whatever a failing run left
        for proc in _marked(value):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()


def test_sigterm_to_the_cli_stops_what_the_deploy_command_started(
    evidence_files: dict[str, Path], tmp_path: Path, marker: str
) -> None:
    store = tmp_path / "store"
    env = {**os.environ, "PROMOTION_STORE": str(store), "MLFLOW_REGISTRY_URI": f"sqlite:///{store}/mlflow.db"}
    env.pop("PROMOTION_LOCK_ID", None)
    holder = subprocess.Popen(
        [sys.executable, "-m", "promotion", "promote", "--env", "dev",
         "--candidate", str(evidence_files["candidate"]), "--loadtest", str(evidence_files["loadtest"]),
         "--policy-report", str(evidence_files["policy_report"]),
         "--build-record", str(evidence_files["build_record"]),
         "--smoke-command", "true", "--deploy-command", "sh -c 'sleep 300 & wait'"],
        cwd=REPO, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not [p for p in _marked(marker) if p.name() == "sleep"]:
            assert holder.poll() is None, f"the promotion ended before its deploy: {holder.communicate()}"
            assert time.monotonic() < deadline, "the deploy never started"
            time.sleep(0.1)
        os.kill(holder.pid, signal.SIGTERM)  # the promotion only, as a runner or the kubelet sends it
        _, err = holder.communicate(timeout=60)
    finally:
        stop_group(holder, grace_s=1)
    assert holder.returncode == -signal.SIGTERM, err
    assert _sleeps(marker) == [], "SIGTERM left the deploy command's children running"
    assert not (store / "sentiment" / "environments" / "dev.lock").exists(), err


@pytest.mark.parametrize(
    ("command", "timeout_s", "error"),
    [
        ("sh -c 'sleep 300 & wait'", 1.0, "did not finish in 1 s"),
        # Ignores SIGTERM, and so does its child (an ignored signal stays ignored across exec): SIGKILL after the grace.
        ("sh -c 'trap \"\" TERM; sleep 300 & wait'", 1.0, "did not finish in 1 s"),
        ("sh -c 'sleep 300 &'", 60.0, None),  # exits 0 at once, its child still running
    ],
    ids=["timeout", "timeout-ignoring-sigterm", "left-behind-after-exit"],
)
def test_a_deploy_command_ends_with_everything_it_started(
    command: str, timeout_s: float, error: str | None, marker: str
) -> None:
    deployer = CommandDeployer(
        stack="dev",
        environment="dev",
        deploy_command=command,
        smoke_command="true",
        timeout_s=timeout_s,
        stop_grace_s=1.0,
    )
    t0 = time.monotonic()
    if error:
        with pytest.raises(DeployError, match=error):
            deployer.up("registry.example/serving@sha256:" + "2" * 64)
    else:
        deployer.up("registry.example/serving@sha256:" + "2" * 64)
    assert _sleeps(marker) == [], f"`{command}` left its children running"
    assert time.monotonic() - t0 < timeout_s + 10, "the group was not stopped within its grace"
