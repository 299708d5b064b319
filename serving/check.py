"""Smoke test of a running server (`python -m serving check`): exits non-zero on a wrong answer.

Checks, in order: the endpoint is ready; every answer has probabilities that sum to 1 (and, with
--bundle, a label of the bundle's labels.json); with --bundle, the answers equal the bundle's ONNX model run locally with the Hugging Face
tokenizer (the training path) within atol, label for label; each --expect TEXT=LABEL holds; a bad
input (an empty text) gets a per-request error and the next good request is still answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from serving.client import SentimentClient
from serving.errors import InferenceError, RequestTimeoutError, ServingError, UnavailableError

# Obvious cases any trained sentiment model must get right (used when no --bundle/--expect is given).
DEFAULT_EXPECTATIONS = (
    ("I love this, it is absolutely wonderful!", "positive"),
    ("Best day ever, thank you so much", "positive"),
    ("This is terrible, I hate it.", "negative"),
    ("Worst service ever, never again", "negative"),
)
PROBE_TEXTS = (
    "what a great game last night",
    "my phone died again, so annoying",
    "ok",
    "The quick brown fox jumps over the lazy dog " * 40,  # longer than max_length: truncated, not refused
)
PARITY_ATOL = 1e-4


def reference(bundle_dir: str | Path, texts: Sequence[str]) -> tuple[list[str], list[list[float]]]:
    """Labels and probabilities from the bundle's model.onnx run in-process, tokenized as in training."""
    import numpy as np
    import transformers

    from serving.bundle import load_bundle
    from training.export import onnx_logits

    bundle = load_bundle(bundle_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(bundle.path / "tokenizer")
    logits = onnx_logits(bundle.onnx, tokenizer, list(texts), bundle.max_length).astype(np.float64)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    return [bundle.labels[i] for i in probs.argmax(axis=1)], probs.tolist()


def run_check(
    client: SentimentClient,
    *,
    bundle: str | Path | None = None,
    expectations: Sequence[tuple[str, str]] = (),
    atol: float = PARITY_ATOL,
    ready_timeout_s: float = 60.0,
) -> list[str]:
    """Problems found (empty = pass). Raises UnavailableError when the server cannot be reached."""
    client.wait_ready(ready_timeout_s)
    demo_defaults = not bundle and not expectations
    if demo_defaults:
        expectations = DEFAULT_EXPECTATIONS
    texts = list(PROBE_TEXTS) + [t for t, _ in expectations]
    problems: list[str] = []
    predictions = client.classify(texts)
    answered = sorted({pred.label for pred in predictions})
    if demo_defaults and not set(answered) <= {label for _, label in DEFAULT_EXPECTATIONS}:
        # A model of other classes (a ticket router) failed every default case as a "wrong answer" (exit 1).
        raise ServingError(
            f"the endpoint answers labels {answered}, not the demo's negative/positive, so the built-in "
            "sentiment cases cannot judge it: pass --bundle BUNDLE (compare with the exported model) or "
            "--expect TEXT=LABEL with your own classes"
        )
    for text, pred in zip(texts, predictions, strict=True):
        if abs(sum(pred.probabilities) - 1.0) > 1e-3:
            problems.append(f"probabilities {pred.probabilities} for {text[:40]!r} do not sum to 1")
    if bundle:
        labels, probs = reference(bundle, texts)
        for text, pred, label, row in zip(texts, predictions, labels, probs, strict=True):
            if len(pred.probabilities) != len(row):  # another model behind the endpoint than this bundle's
                problems.append(
                    f"{text[:40]!r}: server answers {len(pred.probabilities)} class probabilities, the bundle "
                    f"has {len(row)} classes: is --bundle the bundle this endpoint serves?"
                )
                continue
            diff = max(abs(a - b) for a, b in zip(pred.probabilities, row, strict=True))
            if pred.label != label or diff > atol:
                problems.append(
                    f"{text[:40]!r}: server says {pred.label} {pred.probabilities}, bundle says {label} "
                    f"{tuple(round(x, 6) for x in row)} (max diff {diff:.2g} > {atol:g}?)"
                )
    for (text, expected), pred in zip(expectations, predictions[len(PROBE_TEXTS) :], strict=True):
        if pred.label != expected:
            problems.append(f"{text!r}: expected {expected}, got {pred.label} ({pred.confidence:.3f})")
    try:
        client.classify([""])
        problems.append("an empty text was answered instead of refused with a per-request error")
    except InferenceError as exc:
        if isinstance(exc, UnavailableError | RequestTimeoutError):  # no answer is not a refusal
            raise
    if client.classify([texts[0]])[0].label != predictions[0].label:
        problems.append("after a bad request the server answered a good one differently")
    return problems
