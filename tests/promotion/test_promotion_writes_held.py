"""Ctrl-C or SIGTERM while a promotion writes its outcome waits for the writes (promotion/interrupted.py writes_held).

After the smoke check the new image is live; a signal between the record, the history and the alias left it serving
with no history entry (a rollback would then restore the wrong version) or an alias the history did not name (every
rollback refused). Real signals to this process, a SIGTERM handler like the CLI's, and a store whose history write
is where the signal lands.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from promotion_fixtures import RecordingDeployer, evidence_of

from promotion import interrupted
from promotion import promote as ops
from promotion import rollback as rollback_ops
from promotion.config import load_config
from promotion.registry import Registry
from promotion.store import ModelStore

CFG = load_config()


class Stop(Exception):
    """What the CLI's SIGTERM handler raises (promotion.errors.Terminated), here the test's own."""


@pytest.fixture
def sigterm_raises() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise Stop

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class SignalledStore(ModelStore):
    """The signal arrives as the history is being written (`times` of them); `block_s`: the write then hangs."""

    def __init__(self, root: str, model: str, times: int = 1, block_s: float = 0.0) -> None:
        super().__init__(root, model)
        self.times, self.block_s, self.armed = times, block_s, False

    def append_event(self, environment: str, event: dict[str, Any]) -> None:
        if self.armed:
            for _ in range(self.times):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # each one handled before the next
            time.sleep(self.block_s)  # a store that does not answer: the signal breaks the sleep (EINTR)
        super().append_event(environment, event)


@pytest.mark.parametrize("deployable", [True, False], ids=["deployed", "local"])
def test_a_signal_while_the_history_is_written_waits_for_history_and_alias(
    deployable: bool,
    evidence_files: dict[str, Path],
    tmp_path: Path,
    registry: Registry,
    sigterm_raises: None,
) -> None:
    sigint = signal.getsignal(signal.SIGINT)  # SIG_IGN where CI runs the suite in the background
    store = SignalledStore(str(tmp_path / "store"), f"m-held-{deployable}")
    store.armed = True
    deployer = RecordingDeployer() if deployable else None
    with pytest.raises(Stop):  # delivered once the writes are done, not lost
        ops.promote(
            evidence_of(evidence_files),
            CFG,
            "dev",
            store=store,
            registry=registry,
            deployer=deployer,
            local_run=not deployable,
        )
    assert [e["action"] for e in store.events("dev")] == ["promote"]
    assert registry.alias_version(store.model, "dev") == store.events("dev")[0]["version"]
    assert signal.getsignal(signal.SIGINT) is sigint  # the hold put back what it found


def test_a_rollback_stopped_while_it_writes_still_moves_alias_and_history_together(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry, sigterm_raises: None
) -> None:
    store = SignalledStore(str(tmp_path / "store"), "m-held-rollback")
    for _ in range(2):
        ops.promote(evidence_of(evidence_files), CFG, "dev", store=store, registry=registry, local_run=True)
    store.armed = True
    with pytest.raises(Stop):
        rollback_ops.rollback("dev", store=store, registry=registry, reason="test")
    assert [e["action"] for e in store.events("dev")] == ["promote", "promote", "rollback"]
    assert registry.alias_version(store.model, "dev") == store.events("dev")[0]["version"]


@pytest.mark.parametrize(("times", "hold_s"), [(2, 30.0), (1, 0.5)], ids=["second-signal", "deadline"])
def test_a_hanging_write_cannot_hold_the_signal_for_ever(
    times: int,
    hold_s: float,
    evidence_files: dict[str, Path],
    tmp_path: Path,
    registry: Registry,
    sigterm_raises: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A second signal, or HOLD_MAX_S after the first, ends the hold during a write that hangs (here 60 s)."""
    monkeypatch.setattr(interrupted, "HOLD_MAX_S", hold_s)
    sigint = signal.getsignal(signal.SIGINT)
    store = SignalledStore(str(tmp_path / "store"), f"m-held-hang-{times}", times=times, block_s=60.0)
    store.armed = True
    started = time.monotonic()
    with pytest.raises(Stop):
        ops.promote(evidence_of(evidence_files), CFG, "dev", store=store, registry=registry, local_run=True)
    assert time.monotonic() - started < 15
    assert signal.getsignal(signal.SIGINT) is sigint
