"""A checkpoint written by a newer training (a higher MANIFEST.json format_version) met by this one: mid-rollout, a
pod of the older image resumes the newer image's run after a preemption.

Before: the format was written and never read. A newer checkpoint was resumed as if it were this format (a
changed meaning read silently), and one whose files this format does not name counted as corrupt: resume and
pruning deleted it, the newer image's progress with it. Now: exit 2 naming the format needed, nothing deleted.
Checkpoints of earlier commits are format 1 like today's (f0825f9's resume by today's `train` was checked by hand:
trainer.json and state.pt keys have not changed since).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training import checkpoint as ckpt
from training import state
from training.cli import main
from training.errors import EXIT_OK, EXIT_USAGE, TrainingError

NEWER = getattr(ckpt, "FORMAT_VERSION", 1) + 1  # getattr: these tests also run on the code before the check
TINY = ["export=false", "baselines=false", "data.max_train_rows=80", "eval_every_steps=5"]


def _write(store: ckpt.Store, step: int, files: dict[str, bytes], **meta: object) -> None:
    ckpt.write_checkpoint(store, ckpt.step_name(step), files, meta={"step": step, "best_step": None, **meta})


def test_a_newer_format_with_other_files_is_refused_not_deleted(tmp_path: Path) -> None:
    store = ckpt.Store(str(tmp_path / "ck"))
    _write(store, 10, {"state.pt": b"w", "trainer.json": b"{}"})
    # The newer layout names its files differently: to this format it looks like a checkpoint without state.pt.
    _write(store, 20, {"shards/model-0.pt": b"w2", "trainer.json": b"{}"}, format_version=NEWER)
    store = ckpt.Store(store.uri)  # the older image's: it committed neither (its own commits skip the check)
    corrupt: list[str] = []
    with pytest.raises(TrainingError, match=rf"checkpoint format {NEWER}, written by a newer training image"):
        found = state.latest_resumable(store, corrupt)
        state._drop_corrupt(store, corrupt, found)  # what resume does with what it skipped
    assert store.dirs(ckpt.STEP_PREFIX) == ["step-000000010", "step-000000020"]
    with pytest.raises(TrainingError, match="reads format 1"):
        ckpt.prune(store, keep_last=1, required=state.REQUIRED_FILES)
    assert store.dirs(ckpt.STEP_PREFIX) == ["step-000000010", "step-000000020"]


def test_train_refuses_to_resume_a_newer_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert main(["train", "--preset", "smoke", "--output", str(out), *TINY, "epochs=1"]) == EXIT_OK
    (newest,) = (out / "checkpoints").glob("step-*")
    manifest = json.loads((newest / "MANIFEST.json").read_text())
    (newest / "MANIFEST.json").write_text(json.dumps({**manifest, "format_version": NEWER}))
    capsys.readouterr()
    assert main(["train", "--preset", "smoke", "--output", str(out), *TINY, "epochs=2"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"reads format 1. Resume it with an image that reads format {NEWER}" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in (out / "checkpoints").glob("step-*")) == [newest.name]
