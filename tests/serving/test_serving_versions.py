"""Rollback is a version pin: pinning reloads the live server onto the older version, unpinning returns."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from serving.client import SentimentClient

pytestmark = pytest.mark.integration
TEXTS = ["what a great game last night", "my flight got cancelled again, awful", "ok then"]


@pytest.fixture(scope="module")
def repo(served_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("pinned") / "models"
    shutil.copytree(served_repo, copy)  # this module rewrites configs: leave the shared repo alone
    return copy


@pytest.fixture(scope="module")
def live(repo: Path, triton_factory) -> Iterator:
    yield from triton_factory(repo)


def expected(bundle: Path, model_file: str) -> np.ndarray:
    import transformers

    from training.export import onnx_logits

    tokenizer = transformers.AutoTokenizer.from_pretrained(bundle / "tokenizer")
    logits = onnx_logits(bundle / model_file, tokenizer, TEXTS, 32).astype(np.float64)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def pin(repo: Path, version: str, url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "serving", "pin", str(repo), version, "--url", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_pin_rolls_back_to_the_previous_version_and_unpin_restores(
    live, repo: Path, tiny_bundle: Path
) -> None:
    import tritonclient.http as http

    admin = http.InferenceServerClient(live.http_url)
    fp32, int8 = expected(tiny_bundle, "model.onnx"), expected(tiny_bundle, "model.int8.onnx")
    with SentimentClient(live.http_url) as client:

        def served() -> np.ndarray:
            return np.array([p.probabilities for p in client.classify(TEXTS)])

        np.testing.assert_allclose(served(), fp32, atol=1e-4)  # latest = version 2 = fp32
        pin(repo, "1", live.http_url)
        assert admin.is_model_ready("classifier", "1") and not admin.is_model_ready("classifier", "2")
        np.testing.assert_allclose(served(), int8, atol=1e-4)  # version 1 = int8
        pin(repo, "latest", live.http_url)
        assert admin.is_model_ready("classifier", "2")
        np.testing.assert_allclose(served(), fp32, atol=1e-4)
