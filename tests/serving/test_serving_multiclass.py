"""A team's own classes, not the demo's negative/positive: a 3-label bundle built and served by the real
tritonserver, checked, load-tested, and recorded (one repository, one server for the module)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from serving.check import reference, run_check
from serving.client import SentimentClient
from serving.errors import ServingError
from serving.loadtest import run as loadtest
from tests.serving.conftest import serve_recording

pytestmark = pytest.mark.integration
# Not alphabetical, an accent, a space, upper case: class id = position, names passed through as UTF-8.
LABELS = ("Facturación", "Technical support", "account")
TEXTS = ["my invoice is wrong", "the app crashes at login", "how do I change my email?", "ok"]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.export import make_tiny_bundle

    return make_tiny_bundle(
        tmp_path_factory.mktemp("bundle3") / "export", seed=1, quantize=True, labels=LABELS
    )


@pytest.fixture(scope="module")
def served(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    yield from serve_recording(bundle, tmp_path_factory.mktemp("repo3"))


def test_bundle_carries_the_classes_in_their_order(bundle: Path) -> None:
    assert json.loads((bundle / "labels.json").read_text(encoding="utf-8")) == list(LABELS)
    meta = json.loads((bundle / "metadata.json").read_text(encoding="utf-8"))
    assert meta["outputs"][0]["shape"] == [-1, 3]
    assert (bundle / "model.int8.onnx").is_file()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_answers_name_the_teams_classes_like_the_bundle(served, bundle: Path, protocol: str) -> None:  # noqa: ANN001
    server, _ = served
    url = server.http_url if protocol == "http" else server.grpc_url
    with SentimentClient(url, protocol=protocol) as client:  # type: ignore[arg-type]
        predictions = client.classify(TEXTS)
    labels, probabilities = reference(bundle, TEXTS)
    assert [p.label for p in predictions] == labels and set(labels) <= set(LABELS)
    for pred, row in zip(predictions, probabilities, strict=True):
        assert len(pred.probabilities) == 3
        assert pred.probabilities == pytest.approx(row, abs=1e-4)
        assert pred.confidence == pytest.approx(max(row), abs=1e-4)


def test_check_compares_with_the_bundle_and_refuses_the_demo_cases(served, bundle: Path) -> None:  # noqa: ANN001
    """Before: without --bundle/--expect the built-in sentiment cases judged a ticket router, and every one
    'failed' as a wrong answer (expected positive, got account): exit 1, as if the model were broken."""
    server, _ = served
    with SentimentClient(server.http_url) as client:
        assert run_check(client, bundle=bundle) == []
        said = client.classify([TEXTS[0]])[0].label
        assert run_check(client, expectations=[(TEXTS[0], said)]) == []
        with pytest.raises(ServingError, match=r"not the demo's negative/positive.*--bundle.*--expect"):
            run_check(client)
    cli = [sys.executable, "-m", "serving", "check", "--url", server.http_url]
    out = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "--expect TEXT=LABEL" in out.stderr


def test_loadtest_and_inference_records_with_three_classes(served, bundle: Path) -> None:  # noqa: ANN001
    import time

    server, records = served
    report = loadtest(server.grpc_url, TEXTS, concurrencies=(2,), requests=12, warmup_requests=1)
    assert report["results"][0]["errors"] == 0
    # Every request carried one of TEXTS: each record is the bundle's answer to one of them.
    labels, probabilities = reference(bundle, TEXTS)
    answers = [(label, max(row)) for label, row in zip(labels, probabilities, strict=True)]
    rows: list[dict] = []
    deadline = time.monotonic() + 30  # the writer flushes every 2 s, off the request path
    while time.monotonic() < deadline and not rows:
        time.sleep(0.5)
        rows = [
            json.loads(line) for f in sorted(records.rglob("*.jsonl")) for line in f.read_text().splitlines()
        ]
    assert rows, f"no inference record under {records}"
    for row in rows:
        assert any(
            row["prediction"] == label and row["probability"] == pytest.approx(p, abs=1e-4)
            for label, p in answers
        ), (row["prediction"], row["probability"], answers)
