"""A lock whose holder is provably gone is taken over; SIGTERM leaves no lock and no deploy behind.

A promotion SIGKILLed on this machine (an OOM kill, `kill -9`) left its lock, and every later run of the
environment was refused until a person ran `unlock`. A SIGTERM (a cancelled CI job, a deleted pod) did the same and
also left its deploy command running: Python's default for SIGTERM runs no clean-up. Both through the real CLI."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from promotion_fixtures import alive, deploying, promote_args, promotion_cli

from localservers import stop_group


def test_sigterm_stops_the_deploy_and_frees_the_environment(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    holder = deploying(evidence_files, store, tmp_path / "deploy.pid")
    deploy_pid = int((tmp_path / "deploy.pid").read_text())
    try:
        os.kill(holder.pid, signal.SIGTERM)  # the promotion only, as a runner or the kubelet sends it
        _, err = holder.communicate(timeout=60)
    finally:
        stop_group(holder, grace_s=1)
    assert holder.returncode == -signal.SIGTERM, err  # dies of the signal as before: 143 in a shell
    assert "terminated (SIGTERM)" in err, err
    assert not (store / "sentiment" / "environments" / "dev.lock").exists(), "SIGTERM left the lock"
    try:
        assert not alive(deploy_pid), "SIGTERM left the deploy command running"
    finally:
        if alive(deploy_pid):
            os.kill(deploy_pid, signal.SIGKILL)
    again = promotion_cli(*promote_args(evidence_files, "true"), store=store)
    assert again.returncode == 0, again.stderr


def test_a_lock_whose_holder_is_gone_from_this_machine_is_taken_over(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    lock_file = store / "sentiment" / "environments" / "dev.lock"
    holder = deploying(evidence_files, store, tmp_path / "deploy.pid")
    deploy_pid = int((tmp_path / "deploy.pid").read_text())
    try:
        os.kill(holder.pid, signal.SIGKILL)  # the promotion only: its deploy goes on, orphaned
        holder.wait(30)
        lock = json.loads(lock_file.read_text())
        # Its pid is gone but the deploy it started still runs: not provably gone, refused as before.
        refused = promotion_cli(*promote_args(evidence_files, "true"), store=store)
        assert refused.returncode == 2 and f"--lock-id {lock['lock_id']}" in refused.stderr, refused.stderr
        assert json.loads(lock_file.read_text())["lock_id"] == lock["lock_id"]
    finally:
        if alive(deploy_pid):
            os.kill(deploy_pid, signal.SIGKILL)
        stop_group(holder, grace_s=1)
    for _ in range(100):
        if not alive(deploy_pid):
            break
        time.sleep(0.1)

    taken = promotion_cli(*promote_args(evidence_files, "true"), store=store)
    assert taken.returncode == 0, taken.stderr
    assert f"took over the lock {lock_file}" in taken.stderr and lock["lock_id"] in taken.stderr, taken.stderr
    assert not lock_file.exists()

    # Another machine's holder (a vanished CI runner) cannot be proved gone from here: refused, unlock named.
    elsewhere = {**lock, "host": "runner-that-vanished"}
    lock_file.write_text(json.dumps(elsewhere))
    refused = promotion_cli(*promote_args(evidence_files, "true"), store=store)
    assert refused.returncode == 2 and f"unlock --env dev --lock-id {lock['lock_id']}" in refused.stderr
    assert json.loads(lock_file.read_text()) == elsewhere
