"""The deploy half of a promotion: `pulumi up` with the new image, a smoke check of the live
endpoint, and the way back when either fails.

The order is fixed in `promote.promote`: gates (the approval among them) -> `up` -> `smoke` ->
only then the registry alias and the history move. A failed `up` or `smoke` calls `rollback`
with the image the environment served before, and the alias stays where it was.

`CommandDeployer` runs the pipeline's commands without a shell; they get the target in the
environment: PROMOTION_IMAGE (`<registry>/<repo>@sha256:...`), PROMOTION_STACK,
PROMOTION_ENVIRONMENT, and PROMOTION_LOADTEST_OUT (where the smoke check writes its load test of
the live endpoint, if asked to), e.g.

    --deploy-command 'pulumi up --yes --stack $PROMOTION_STACK --config-file ...'   (via a script)
    --smoke-command  .github/scripts/smoke.sh   (`python -m serving check` + `loadtest` on a port-forward)

Each command runs in its own session, and nothing of it outlives it: when it exits, times out, or the promotion
is stopped (Ctrl-C, SIGTERM), its whole process group gets SIGTERM, then SIGKILL after `STOP_GRACE_S`. Killing
only the direct child left what a script had started (`kubectl port-forward &`, a `pulumi up` under a wrapper)
running, carrying the lock id, so the environment could not be taken over either (takeover.py).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from promotion.errors import PromotionError

STOP_GRACE_S = 10.0
"""How long a stopped command's process group has between SIGTERM and SIGKILL. Under a pod's default 30 s
termination grace (the pipeline's promote step) and the pipeline runner's 60 s, so that the promotion still
removes its lock before it is killed itself."""
POLL_S = 0.1


class DeployError(PromotionError):
    """`up` or `smoke` failed; the promotion is not made."""


class Deployer(Protocol):
    def up(self, image: str) -> None:
        """Deploy `image` to the environment's stack; raise DeployError on failure."""

    def smoke(self, image: str) -> bytes | None:
        """Check the live endpoint now serves and answers; raise DeployError on failure.
        Returns the load test run against the live endpoint (JSON bytes), if the check ran one:
        it is stored with the record and judges the next environment."""

    def rollback(self, image: str | None) -> None:
        """Put the stack back on `image` (None: nothing was deployed before)."""


@dataclass(frozen=True, slots=True)
class CommandDeployer:
    stack: str
    environment: str
    deploy_command: str
    smoke_command: str
    post_deploy_loadtest: Path | None = None
    """Where the smoke command writes its load test of the live endpoint (optional)."""
    timeout_s: float = 1800
    stop_grace_s: float = STOP_GRACE_S

    def _run(self, command: str, image: str | None, what: str) -> None:
        env = {
            **os.environ,
            "PROMOTION_IMAGE": image or "",
            "PROMOTION_STACK": self.stack,
            "PROMOTION_ENVIRONMENT": self.environment,
            "PROMOTION_LOADTEST_OUT": str(self.post_deploy_loadtest or ""),
        }
        try:
            rc = run_group(shlex.split(command), env, self.timeout_s, self.stop_grace_s)
        except subprocess.TimeoutExpired as exc:
            raise DeployError(
                f"{what} `{command}` did not finish in {self.timeout_s:g} s: stopped, with what it had started"
            ) from exc
        except OSError as exc:
            raise DeployError(f"{what} `{command}` could not run: {exc}") from exc
        if rc != 0:
            raise DeployError(f"{what} `{command}` exited {rc}")

    def up(self, image: str) -> None:
        self._run(self.deploy_command, image, "deploy")

    def smoke(self, image: str) -> bytes | None:
        path = self.post_deploy_loadtest
        if path is not None:
            path.unlink(missing_ok=True)  # never hand on a stale file from an earlier run
        self._run(self.smoke_command, image, "post-deploy smoke check")
        if path is None:
            return None
        if not path.is_file():
            raise DeployError(f"the smoke check wrote no load test to {path}")
        return path.read_bytes()

    def rollback(self, image: str | None) -> None:
        if image:
            self._run(self.deploy_command, image, "rollback deploy")


def run_group(argv: list[str], env: dict[str, str], timeout_s: float, grace_s: float) -> int:
    """`argv`'s exit status; it runs in a session of its own, and its process group is stopped however this ends
    (its exit, `timeout_s`, an exception such as Ctrl-C or the CLI's SIGTERM): a command's work ends with it."""
    # A session, not only a group: outside a terminal's foreground group a process reading the terminal stops.
    proc = subprocess.Popen(argv, env=env, start_new_session=True)
    try:
        rc = proc.wait(timeout_s)
    except BaseException:
        stop_group(proc, grace_s)
        raise
    if group_alive(proc.pid):  # exited, but left processes behind (a background `&` without a trap)
        stop_group(proc, grace_s)
    return rc


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to `proc`'s process group, SIGKILL once `grace_s` has passed with any of it alive. The SIGKILL is in
    a `finally`: a second Ctrl-C or SIGTERM while waiting must not leave the group running."""
    try:
        kill_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            proc.poll()  # reaps the leader: a zombie leader would keep the group "alive"
            if not group_alive(proc.pid):
                break
            time.sleep(POLL_S)
    finally:
        kill_group(proc.pid, signal.SIGKILL)
        proc.wait()


def kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    """A live member of the group: zombies are left out, since where PID 1 does not reap (some containers) the
    orphaned children of a killed script stay zombies, and killpg(0) would count them forever. Also the pipeline's
    test of a step's group (pipeline/supervise.py)."""
    proc_fs = "/proc"
    if not os.path.isdir(proc_fs + "/self"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in os.scandir(proc_fs):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"{proc_fs}/{entry.name}/stat", "rb") as f:  # "pid (comm) state ppid pgrp ..."
                    state, _, group = f.read().rsplit(b")", 1)[1].split()[:3]
                if int(group) == pgid and state != b"Z":
                    return True
    return False
