"""Nothing a deploy or smoke command started outlives it: its whole process group is stopped.

Only the direct child was killed (subprocess.run's kill on a timeout, on Ctrl-C, on the CLI's SIGTERM), so what a
script had started, `kubectl port-forward &`, a `pulumi up` under a wrapper, a `sleep` here, ran on orphaned,
still carrying the promotion's lock id (no takeover of the lock while it ran) and changing the environment after
the promotion had given up. Each command is a real shell; its `sleep` is found by a marker in its environment.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from promotion_fixtures import live_sleeps, marked, promote_args, promotion_cli

from localservers import stop_group
from promotion.deploy import CommandDeployer, DeployError


def test_sigterm_to_the_cli_stops_what_the_deploy_command_started(
    evidence_files: dict[str, Path], tmp_path: Path, marker: str
) -> None:
    store = tmp_path / "store"
    holder = promotion_cli(
        *promote_args(evidence_files, "sh -c 'sleep 300 & wait'"), store=store, background=True
    )
    try:
        deadline = time.monotonic() + 120
        while not [p for p in marked(marker) if p.name() == "sleep"]:
            assert holder.poll() is None, f"the promotion ended before its deploy: {holder.communicate()}"
            assert time.monotonic() < deadline, "the deploy never started"
            time.sleep(0.1)
        os.kill(holder.pid, signal.SIGTERM)  # the promotion only, as a runner or the kubelet sends it
        _, err = holder.communicate(timeout=60)
    finally:
        stop_group(holder, grace_s=1)
    assert holder.returncode == -signal.SIGTERM, err
    assert live_sleeps(marker) == [], "SIGTERM left the deploy command's children running"
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
    assert live_sleeps(marker) == [], f"`{command}` left its children running"
    assert time.monotonic() - t0 < timeout_s + 10, "the group was not stopped within its grace"
