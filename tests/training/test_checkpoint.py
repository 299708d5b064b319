"""Checkpoint store: atomic commit by manifest, fallback past broken checkpoints, pruning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training import checkpoint as ckpt


def _write(store: ckpt.Store, step: int, payload: bytes = b"weights") -> None:
    ckpt.write_checkpoint(
        store, ckpt.step_name(step), {"state.pt": payload + bytes([step]), "trainer.json": b"{}"}
    )


def test_latest_complete_checkpoint_wins(tmp_path: Path) -> None:
    store = ckpt.Store(str(tmp_path / "ck"))
    for step in (10, 20):
        _write(store, step)
    found = ckpt.latest(store)
    assert found is not None and found.step == 20
    assert found.files["state.pt"] == b"weights" + bytes([20])
    assert json.loads(store.read("step-000000020/MANIFEST.json"))["files"]["state.pt"]["bytes"] == 8


@pytest.mark.parametrize("damage", ["truncate", "corrupt", "no_manifest", "missing_file", "bad_manifest"])
def test_broken_newest_checkpoint_falls_back(tmp_path: Path, damage: str) -> None:
    store = ckpt.Store(str(tmp_path / "ck"))
    _write(store, 10)
    _write(store, 20, payload=b"x" * 1000)
    newest = tmp_path / "ck" / "step-000000020"
    if damage == "truncate":
        data = (newest / "state.pt").read_bytes()
        (newest / "state.pt").write_bytes(data[: len(data) // 2])
    elif damage == "corrupt":
        data = bytearray((newest / "state.pt").read_bytes())
        data[5] ^= 0xFF
        (newest / "state.pt").write_bytes(bytes(data))
    elif damage == "no_manifest":
        (newest / "MANIFEST.json").unlink()
    elif damage == "missing_file":
        (newest / "trainer.json").unlink()
    else:
        (newest / "MANIFEST.json").write_text("{not json", encoding="utf-8")
    found = ckpt.latest(store)
    assert found is not None and found.step == 10


def test_nothing_complete_means_fresh_start(tmp_path: Path) -> None:
    store = ckpt.Store(str(tmp_path / "ck"))
    assert ckpt.latest(store) is None
    store.write("step-000000005/state.pt", b"half written")  # crashed before its manifest
    assert ckpt.latest(store) is None


def test_prune_keeps_last_k_complete(tmp_path: Path) -> None:
    store = ckpt.Store(str(tmp_path / "ck"))
    store.write("step-000000001/state.pt", b"incomplete and old")
    for step in (10, 20, 30):
        _write(store, step)
    deleted = ckpt.prune(store, keep_last=2)
    assert deleted == ["step-000000001", "step-000000010"]
    assert store.dirs(ckpt.STEP_PREFIX) == ["step-000000020", "step-000000030"]


def test_no_temporary_files_are_left(tmp_path: Path) -> None:
    store = ckpt.Store(str(tmp_path / "ck"))
    _write(store, 10)
    assert sorted(p.name for p in (tmp_path / "ck" / "step-000000010").iterdir()) == [
        "MANIFEST.json",
        "state.pt",
        "trainer.json",
    ]


@pytest.mark.parametrize(("store_step", "uploaded"), [(None, True), (5, True), (10, False), (15, False)])
def test_a_rescued_checkpoint_is_uploaded_only_when_newer_and_the_local_copy_is_then_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, store_step: int | None, uploaded: bool
) -> None:
    """A storage outage can strike before step 10's upload or after it (the pruning that follows): the
    rerun uploads the local copy only in the first case, and in both leaves no local copy behind (CI saw the
    second case leave it, and a later rerun would have found it again)."""
    from training.state import _push_rescued

    store, rescue = ckpt.Store(str(tmp_path / "bucket")), ckpt.Store(str(tmp_path / "rescue"))
    if store_step is not None:
        _write(store, store_step)
    _write(rescue, 10, payload=b"kept")
    with caplog.at_level("INFO", logger="training"):
        found = _push_rescued(store, rescue, ckpt.latest(store))
    newest = max(10, store_step or 0)
    assert found is not None and found.step == newest and ckpt.latest(store).step == newest
    assert ckpt.latest(rescue) is None and rescue.dirs(ckpt.STEP_PREFIX) == []
    assert ("uploading step-000000010" in caplog.text) is uploaded, caplog.text
    assert ("removing the local copy" in caplog.text) is not uploaded, caplog.text
    if uploaded:
        assert found.files["state.pt"] == b"kept" + bytes([10])


def test_a_users_copy_of_a_checkpoint_folder_is_neither_resumed_nor_pruned(tmp_path: Path) -> None:
    """`cp -r step-000000030 step-000000030.bak` beside the run: resume crashed (int('000000030.bak')),
    and pruning picked the copy as a kept checkpoint and deleted real ones."""
    store = ckpt.Store(str(tmp_path / "ck"))
    for step in (10, 20, 30):
        _write(store, step)
    ckpt.write_checkpoint(store, "step-000000030.bak", {"state.pt": b"copy", "trainer.json": b"{}"})
    ckpt.write_checkpoint(store, "best-000000020-keep", {"model.pt": b"mine"})
    ckpt.write_checkpoint(store, "best-000000020", {"model.pt": b"best"})
    found = ckpt.latest(store)
    assert found is not None and found.name == "step-000000030" and found.step == 30
    assert ckpt.prune(store, keep_last=2) == ["step-000000010"]
    assert ckpt.prune_best(store, 20) == []
    left = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert left == [
        "best-000000020",
        "best-000000020-keep",
        "step-000000020",
        "step-000000030",
        "step-000000030.bak",
    ]


def test_steps_are_ordered_by_number_not_by_name(tmp_path: Path) -> None:
    store = ckpt.Store(str(tmp_path / "ck"))
    for step in (999_999_999, 1_000_000_000):  # past the 9 digits step_name pads to
        ckpt.write_checkpoint(store, ckpt.step_name(step), {"state.pt": b"w", "trainer.json": b"{}"})
    assert store.dirs(ckpt.STEP_PREFIX) == ["step-999999999", "step-1000000000"]
    assert ckpt.latest(store).step == 1_000_000_000
