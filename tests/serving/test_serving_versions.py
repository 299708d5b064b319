"""Rollback is whole: each `sentiment` version runs its own build's classifier (and tokenizer), so asking
for an older version, or pinning it on the live server, serves the older model end to end."""

from __future__ import annotations

import json
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


def expected(bundle: Path, model_file: str, texts: list[str] = TEXTS) -> np.ndarray:
    import transformers

    from training.export import onnx_logits

    tokenizer = transformers.AutoTokenizer.from_pretrained(bundle / "tokenizer")
    logits = onnx_logits(bundle / model_file, tokenizer, texts, 32).astype(np.float64)
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


def versioned(url: str, version: str, texts: list[str] = TEXTS) -> np.ndarray:
    import tritonclient.http as http

    text = http.InferInput("TEXT", [len(texts), 1], "BYTES")
    text.set_data_from_numpy(np.array([[t.encode()] for t in texts], dtype=object))
    result = http.InferenceServerClient(url).infer("sentiment", [text], model_version=version)
    return result.as_numpy("PROBABILITIES").astype(np.float64)


def test_each_endpoint_version_runs_the_classifier_of_its_own_build(live, tiny_bundle: Path) -> None:
    """served_repo: version 1 = the int8 model, version 2 = fp32; both loaded, no pin."""
    fp32, int8 = expected(tiny_bundle, "model.onnx"), expected(tiny_bundle, "model.int8.onnx")
    gap = np.abs(fp32 - int8).max()
    assert gap > 1e-4  # the two models answer measurably differently, so the test can tell them apart
    v1, v2 = versioned(live.http_url, "1"), versioned(live.http_url, "2")
    np.testing.assert_allclose(v1, int8, atol=gap / 5)
    np.testing.assert_allclose(v2, fp32, atol=gap / 5)
    # Under the old ensemble (steps at version -1) version 1 answered with the newest classifier: fp32.
    assert np.abs(v1 - v2).max() > gap / 2


def infer_cli(url: str, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "serving", "infer", *TEXTS, "--url", url, *more],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_cli_asks_the_version_it_is_told(live, tiny_bundle: Path) -> None:
    """`serving infer --model-version N`: the README promised the previous version stays addressable, but the CLI
    could only ask the newest."""
    fp32, int8 = expected(tiny_bundle, "model.onnx"), expected(tiny_bundle, "model.int8.onnx")
    gap = np.abs(fp32 - int8).max()
    for version, want in (("1", int8), ("2", fp32)):
        done = infer_cli(live.http_url, "--model-version", version)
        assert done.returncode == 0, done.stderr
        got = np.array([json.loads(line)["probabilities"] for line in done.stdout.splitlines()])
        np.testing.assert_allclose(got, want, atol=gap / 5)
    missing = infer_cli(live.http_url, "--model-version", "9")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr, missing.stderr
    assert "9" in missing.stderr


def test_pinning_a_repository_the_server_does_not_serve_is_an_error(live, repo: Path, tmp_path: Path) -> None:
    """The server reloads from its own --model-repository: a pinned copy elsewhere changes nothing there,
    and saying "reloaded" would announce a rollback that did not happen."""
    other = tmp_path / "models"
    shutil.copytree(repo, other)
    done = subprocess.run(
        [sys.executable, "-m", "serving", "pin", str(other), "1", "--url", live.http_url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "serves classifier versions [1, 2], sentiment versions [1, 2], not [1]" in done.stderr
    assert "pin the repository that server was started on" in done.stderr
    for protocol, url in (("http", live.http_url), ("grpc", live.grpc_url)):
        with SentimentClient(url, protocol=protocol) as client:  # type: ignore[arg-type]
            assert client.ready_versions("sentiment") == [1, 2]  # still both: nothing rolled back
