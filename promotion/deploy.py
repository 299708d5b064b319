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
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from promotion.errors import PromotionError


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

    def _run(self, command: str, image: str | None, what: str) -> None:
        env = {
            **os.environ,
            "PROMOTION_IMAGE": image or "",
            "PROMOTION_STACK": self.stack,
            "PROMOTION_ENVIRONMENT": self.environment,
            "PROMOTION_LOADTEST_OUT": str(self.post_deploy_loadtest or ""),
        }
        try:
            proc = subprocess.run(shlex.split(command), env=env, timeout=self.timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DeployError(f"{what} `{command}` could not run: {exc}") from exc
        if proc.returncode != 0:
            raise DeployError(f"{what} `{command}` exited {proc.returncode}")

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
