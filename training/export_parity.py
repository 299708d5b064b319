"""Parity: does an ONNX graph compute what the PyTorch model computes, on real texts?

Every graph the bundle ships (the exported one, the fused one from export_optimize) passes this check
before it is written; the int8 graph is judged by accuracy instead (export_quantize).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from training.export_errors import ParityError

if TYPE_CHECKING:  # heavy imports stay out of `python -m training --help`
    import numpy as np

INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "logits"
# The parity bar: logits within 1e-4 of PyTorch and the same predicted class on every text.
PARITY_ATOL = 1e-4
# Real runs check parity on at least this many held-out texts; tests and demos may use fewer.
MIN_PARITY_TEXTS = 500


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


def tokenize(tokenizer: Any, texts: Sequence[str], max_length: int) -> dict[str, np.ndarray]:
    # Dynamic padding per batch: parity then covers several sequence lengths, as serving will see them.
    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="np")
    return {name: enc[name].astype("int64") for name in INPUT_NAMES}


def batches(texts: Sequence[str], size: int) -> list[Sequence[str]]:
    return [texts[i : i + size] for i in range(0, len(texts), size)]


def torch_logits(
    model: Any, tokenizer: Any, texts: Sequence[str], max_length: int, batch_size: int = 64
) -> np.ndarray:
    import numpy as np
    import torch

    out = []
    with torch.inference_mode():
        for chunk in batches(texts, batch_size):
            enc = {k: torch.from_numpy(v) for k, v in tokenize(tokenizer, chunk, max_length).items()}
            out.append(model(**enc).logits.float().numpy())
    return np.concatenate(out)


def onnx_logits(
    path: Path, tokenizer: Any, texts: Sequence[str], max_length: int, batch_size: int = 64
) -> np.ndarray:
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = [
        session.run([OUTPUT_NAME], tokenize(tokenizer, chunk, max_length))[0]
        for chunk in batches(texts, batch_size)
    ]
    return np.concatenate(out)
