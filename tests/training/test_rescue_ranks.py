"""Exit 69 with several local ranks: one rescue checkpoint (rank 0's), and resume never trips on a partial one."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from training import checkpoint as ckpt
from training import state as st
from training.errors import StorageUnavailable


def _dist(rank: int, world_size: int = 2) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        rank=rank,
        world_size=world_size,
        is_main=rank == 0,
        initialized=True,
        device=types.SimpleNamespace(type="cpu"),
        all_gather_object=lambda obj: [obj],
        broadcast_object=lambda obj: obj,
    )


def test_only_rank_0_writes_the_rescue_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every local rank shares OUTPUT/checkpoints-rescue: a non-zero rank's manifest would replace rank 0's."""
    store, rescue = ckpt.Store(str(tmp_path / "bucket")), ckpt.Store(str(tmp_path / "rescue"))
    write = ckpt.write_checkpoint

    def outage(target: ckpt.Store, *args: object, **kwargs: object) -> None:
        if target is store:
            raise StorageUnavailable(store.uri, "write", OSError("down"), 1.0)
        write(target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ckpt, "write_checkpoint", outage)
    state = st.State(step=120)
    with pytest.raises(StorageUnavailable):
        st.save(store, None, _dist(1), None, None, None, None, state, "sha", 0.0, rescue=rescue)  # type: ignore[arg-type]
    assert rescue.dirs(ckpt.STEP_PREFIX) == []


def _rank1_only(store: ckpt.Store, step: int) -> None:
    """What the old rescue left when rank 1's manifest landed last: a 'complete' checkpoint of rank 1's file."""
    ckpt.write_checkpoint(store, ckpt.step_name(step), {"rank-00001.pt": b"r1"}, meta={"step": step})


def test_a_checkpoint_without_rank_0s_files_is_skipped_not_a_keyerror(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, rescue = ckpt.Store(str(tmp_path / "bucket")), ckpt.Store(str(tmp_path / "rescue"))
    trainer = {"state": {"step": 100}, "world_size": 1, "dataset_manifest_sha256": "sha", "config": {}}
    ckpt.write_checkpoint(
        store, ckpt.step_name(100), {"state.pt": b"S", "trainer.json": json.dumps(trainer).encode()}
    )
    _rank1_only(rescue, 120)
    _rank1_only(store, 130)
    found = st._push_rescued(store, rescue, st.latest_resumable(store))
    assert found is not None and found.step == 100  # the partial rescue is not uploaded as the newest step
    assert [n for n in store.dirs(ckpt.STEP_PREFIX) if n.endswith("120")] == []
    with caplog.at_level("ERROR", logger="training"):
        found = st.latest_resumable(store)
    assert found is not None and found.step == 100
    assert "step-000000130 lists no state.pt or trainer.json" in caplog.text


def test_resume_skips_the_partial_checkpoint(tmp_path: Path) -> None:
    """Only the partial checkpoint exists: a fresh start (None), not KeyError: 'trainer.json'."""
    store = ckpt.Store(str(tmp_path / "bucket"))
    _rank1_only(store, 120)
    assert st.resume(store, None, _dist(0, 1), None, None, None, None, "sha") is None  # type: ignore[arg-type]
