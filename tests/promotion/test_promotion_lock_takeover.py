"""A lock whose holder is provably gone is taken over; SIGTERM leaves no lock and no deploy behind.

A promotion SIGKILLed on this machine (an OOM kill, `kill -9`) left its lock, and every later run of the
environment was refused until a person ran `unlock`. A SIGTERM (a cancelled CI job, a deleted pod) did the same and
also left its deploy command running: Python's default for SIGTERM runs no clean-up. Both through the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from localservers import stop_group

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, store: Path, background: bool = False) -> subprocess.Popen | subprocess.CompletedProcess:
    env = {**os.environ, "PROMOTION_STORE": str(store), "MLFLOW_REGISTRY_URI": f"sqlite:///{store}/mlflow.db"}
    env.pop("PROMOTION_LOCK_ID", None)
    cmd = [sys.executable, "-m", "promotion", *args]
    if background:
        return subprocess.Popen(
            cmd,
            cwd=REPO,
            env=env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)


def _promote(files: dict[str, Path], deploy: str) -> list[str]:
    return [
        "promote", "--env", "dev", "--candidate", str(files["candidate"]), "--loadtest", str(files["loadtest"]),
        "--policy-report", str(files["policy_report"]), "--build-record", str(files["build_record"]),
        "--smoke-command", "true", "--deploy-command", deploy,
    ]  # fmt: skip


def _deploying(files: dict[str, Path], store: Path, pidfile: Path) -> subprocess.Popen:
    """A promotion inside a deploy that writes its pid and runs until stopped."""
    holder = _cli(
        *_promote(files, f"sh -c 'echo $$ > {pidfile}; exec sleep 120'"), store=store, background=True
    )
    for _ in range(1200):
        if pidfile.exists() and pidfile.read_text().strip() or holder.poll() is not None:
            break
        time.sleep(0.1)
    assert pidfile.exists(), f"the promotion never reached its deploy: {holder.communicate()}"
    time.sleep(0.2)
    return holder


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def test_sigterm_stops_the_deploy_and_frees_the_environment(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    holder = _deploying(evidence_files, store, tmp_path / "deploy.pid")
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
        assert not _alive(deploy_pid), "SIGTERM left the deploy command running"
    finally:
        if _alive(deploy_pid):
            os.kill(deploy_pid, signal.SIGKILL)
    again = _cli(*_promote(evidence_files, "true"), store=store)
    assert again.returncode == 0, again.stderr


def test_a_lock_whose_holder_is_gone_from_this_machine_is_taken_over(
    evidence_files: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    lock_file = store / "sentiment" / "environments" / "dev.lock"
    holder = _deploying(evidence_files, store, tmp_path / "deploy.pid")
    deploy_pid = int((tmp_path / "deploy.pid").read_text())
    try:
        os.kill(holder.pid, signal.SIGKILL)  # the promotion only: its deploy goes on, orphaned
        holder.wait(30)
        lock = json.loads(lock_file.read_text())
        # Its pid is gone but the deploy it started still runs: not provably gone, refused as before.
        refused = _cli(*_promote(evidence_files, "true"), store=store)
        assert refused.returncode == 2 and f"--lock-id {lock['lock_id']}" in refused.stderr, refused.stderr
        assert json.loads(lock_file.read_text())["lock_id"] == lock["lock_id"]
    finally:
        if _alive(deploy_pid):
            os.kill(deploy_pid, signal.SIGKILL)
        stop_group(holder, grace_s=1)
    for _ in range(100):
        if not _alive(deploy_pid):
            break
        time.sleep(0.1)

    taken = _cli(*_promote(evidence_files, "true"), store=store)
    assert taken.returncode == 0, taken.stderr
    assert f"took over the lock {lock_file}" in taken.stderr and lock["lock_id"] in taken.stderr, taken.stderr
    assert not lock_file.exists()

    # Another machine's holder (a vanished CI runner) cannot be proved gone from here: refused, unlock named.
    elsewhere = {**lock, "host": "runner-that-vanished"}
    lock_file.write_text(json.dumps(elsewhere))
    refused = _cli(*_promote(evidence_files, "true"), store=store)
    assert refused.returncode == 2 and f"unlock --env dev --lock-id {lock['lock_id']}" in refused.stderr
    assert json.loads(lock_file.read_text()) == elsewhere
