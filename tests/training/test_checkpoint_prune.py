"""Pruning counts what resume would take, on a folder and on S3 (moto over HTTP).

A checkpoint whose manifest lacks state.pt/trainer.json, or whose files no longer match it, is skipped by
resume; pruning counted it all the same. Being the newest step it was kept in place of this run's saves:
with keep_last=1 the save just written was deleted, and the next attempt after a preemption found nothing.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.training.test_resume_shape import DIST
from tests.training.test_resume_shape import _run as run_of_width
from training import checkpoint as ckpt
from training import state as st


def _run(keep_last: int) -> tuple[types.SimpleNamespace, tuple]:
    config, objs = run_of_width(4)
    config.checkpoint.keep_last = keep_last
    return config, objs


def _save(store: ckpt.Store, keep_last: int, step: int, best_step: int | None = None) -> None:
    config, objs = _run(keep_last)
    state = st.State(step=step, best_step=best_step)
    st.save(store, config, DIST, *objs, state, "sha", 0.0)  # type: ignore[arg-type]


def _best(store: ckpt.Store, step: int) -> None:
    """What training/evaluate.py does on an improvement at `step`."""
    ckpt.write_checkpoint(
        store, ckpt.step_name(step, ckpt.BEST_PREFIX), {"model.pt": b"w"}, meta={"step": step}
    )
    ckpt.prune_best(store, step)


def _resume(store: ckpt.Store) -> st.State | None:
    config, objs = _run(2)
    return st.resume(store, config, DIST, *objs, "sha")  # type: ignore[arg-type]


def _damage(store: ckpt.Store, step: int, how: str) -> None:
    """A checkpoint resume rejects although it has a manifest, written by another process (a crashed
    attempt, a tool): this process never wrote nor verified it."""
    other, name = ckpt.Store(store.uri), ckpt.step_name(step)
    if how == "lacks_state":  # e.g. only a rank's RNG file was committed
        ckpt.write_checkpoint(other, name, {"rank-00000.pt": b"rng"}, meta={"step": step})
    else:
        ckpt.write_checkpoint(
            other, name, {"state.pt": b"x" * 100, "trainer.json": b"{}"}, meta={"step": step}
        )
        other.write(f"{name}/state.pt", b"x" * 50)  # truncated after its manifest was committed


@pytest.fixture(params=["folder", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ckpt.Store]:
    if request.param == "folder":
        yield ckpt.Store(str(tmp_path / "ck"))
        return
    import boto3
    import fsspec

    endpoint = request.getfixturevalue("s3_env")
    bucket = f"prune-{tmp_path.name.lower().replace('_', '-')[-40:]}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(
        Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-south-2"}
    )
    fsspec.get_filesystem_class("s3").clear_instance_cache()
    yield ckpt.Store(f"s3://{bucket}/run")
    fsspec.get_filesystem_class("s3").clear_instance_cache()


@pytest.mark.parametrize("how", ["lacks_state", "truncated"])
@pytest.mark.parametrize("keep_last", [1, 2])
def test_a_checkpoint_resume_rejects_never_pushes_a_good_one_out(
    store: ckpt.Store, keep_last: int, how: str
) -> None:
    """Mid-run: step 30 rejected by resume sits above this run's saves 10 and 20."""
    _save(store, keep_last, 10)
    _damage(store, 30, how)
    _save(store, keep_last, 20)
    kept = [ckpt.step_name(s) for s in (10, 20)[-keep_last:]]
    assert store.dirs(ckpt.STEP_PREFIX) == kept, "the rejected step 30 was kept in place of a good save"
    found = st.latest_resumable(store)
    assert found is not None and found.step == 20


def test_resume_deletes_a_newer_checkpoint_that_lacks_the_run_state(store: ckpt.Store) -> None:
    """As it deletes newer corrupt ones: kept, it was logged as unresumable on every start, forever."""
    _save(store, 2, 10)
    _damage(store, 20, "lacks_state")
    resumed = _resume(store)
    assert resumed is not None and resumed.step == 10
    assert store.dirs(ckpt.STEP_PREFIX) == [ckpt.step_name(10)]
    _save(store, 1, 15)
    assert store.dirs(ckpt.STEP_PREFIX) == [ckpt.step_name(15)]


def test_pruning_after_each_save_does_not_download_the_kept_checkpoints(tmp_path: Path) -> None:
    """The save on a preemption notice prunes too, within the grace period: the checkpoints this process
    wrote or verified are not read again (a MiniLM state.pt with AdamW is ~270 MB)."""
    store = ckpt.Store(str(tmp_path / "ck"))
    for step in (10, 20):
        _save(store, 2, step)
    reads: list[str] = []

    def counted(store: ckpt.Store) -> ckpt.Store:
        real_read = store.read
        store.read = lambda rel: reads.append(rel) or real_read(rel)  # type: ignore[method-assign]
        return store

    _save(counted(store), 2, 30)
    assert reads == [] and store.dirs(ckpt.STEP_PREFIX) == [ckpt.step_name(s) for s in (20, 30)]
    # A new process (after a preemption) verifies once what it did not write: the newest of the kept ones.
    _save(counted(ckpt.Store(store.uri)), 2, 40)
    assert [r for r in reads if r.endswith("state.pt")] == [f"{ckpt.step_name(30)}/state.pt"]


def test_the_best_that_the_checkpoints_record_survives_a_newer_best_until_a_save_records_it(
    store: ckpt.Store,
) -> None:
    """An improvement at step 15 deleted best-10 at once, but step-10's trainer.json still names best 10: a run
    dying before its next save (node loss, OOM kill: no SIGTERM save) resumed without its best weights, and
    its final model silently became the last weights."""
    _best(store, 10)
    _save(store, 1, 10, best_step=10)
    _best(store, 15)
    resumed = _resume(store)  # the run died here, before a save recorded best 15
    assert resumed is not None and resumed.best_step == 10
    assert ckpt.recorded_best(store, resumed.best_step) is not None, "the resumed run lost its best weights"
    _save(store, 1, 20, best_step=15)  # recorded now; step-10 is pruned, and with it the need for best-10
    assert store.dirs(ckpt.BEST_PREFIX) == [ckpt.step_name(15, ckpt.BEST_PREFIX)]
