"""Error responses are counted, and ServingErrorRateHigh fires on them, against the real server.

Triton counts a python-backend response that carries an error as nv_inference_request_success
(nv_inference_request_failure stays 0), so the model counts its error responses itself in
ml_inference_errors_total{kind}. Here: bad texts (kind="invalid_input") and, with the classifier
unloaded under topology bls, valid texts the model cannot answer (kind="internal"). The scraped
numbers then go through promtool with the alert's own expression from monitoring/rules/serving.yaml.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from serving.client import SentimentClient
from serving.errors import InferenceError

pytestmark = pytest.mark.integration
RULES = Path(__file__).resolve().parents[2] / "monitoring" / "rules" / "serving.yaml"
GOOD = "thanks for the kind words"
BAD = ["", b"caf\xc3\xa9 \xff\xfe broken"]  # empty; invalid UTF-8
INTERNAL = 3  # valid requests sent while the classifier is unloaded


@pytest.fixture(scope="module")
def bls_server(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory, triton_factory) -> Iterator:
    """A server of its own: the test unloads its classifier (explicit model control)."""
    from serving.repository import BuildOptions, build

    repo = tmp_path_factory.mktemp("errors") / "models"
    build(tiny_bundle, repo, options=BuildOptions(topology="bls"))
    yield from triton_factory(repo)


SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    """/metrics as (name, labels, value), names as exposed (prometheus_client's parser renames counters)."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    samples = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            name, labels, value = match.groups()
            samples.append((name, dict(LABEL.findall(labels or "")), float(value)))
    return samples


def error_counts(samples) -> dict[str, float]:
    counts: dict[str, float] = {}
    for name, labels, value in samples:
        if name == "ml_inference_errors_total" and labels.get("model") == "sentiment":
            counts[labels["kind"]] = counts.get(labels["kind"], 0.0) + value
    return counts


@pytest.fixture(scope="module")
def failed(bls_server) -> list[tuple[str, dict[str, str], float]]:
    """/metrics after 1 good request, len(BAD) bad ones, then INTERNAL with the classifier unloaded."""
    import tritonclient.http as http

    with SentimentClient(bls_server.http_url, retries=0) as client:
        client.classify([GOOD])
        for text in BAD:
            with pytest.raises(InferenceError, match="TEXT\\[0\\]"):
                client.classify([text])
        admin = http.InferenceServerClient(bls_server.http_url)
        admin.unload_model("classifier")
        admin.close()
        for _ in range(INTERNAL):
            with pytest.raises(InferenceError, match="classifier"):
                client.classify([GOOD])
    return scrape(bls_server.metrics_url)


def test_error_responses_are_counted_by_kind(failed) -> None:
    assert error_counts(failed) == {"invalid_input": len(BAD), "internal": INTERNAL}
    labels = {tuple(sorted(lbl)) for name, lbl, _ in failed if name == "ml_inference_errors_total"}
    assert labels == {("kind", "model", "version")}


def alert_expr() -> str:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    return next(r["expr"] for r in rules if r.get("alert") == "ServingErrorRateHigh")


def test_the_error_rate_alert_reads_the_scraped_failures(failed, tmp_path: Path) -> None:
    """The scraped totals, as per-minute increments, through the alert's expression in promtool."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is missing: apt-get install prometheus")
    names = {"nv_inference_request_success", "nv_inference_request_failure", "ml_inference_errors_total"}
    series = [
        {
            "series": name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}",
            "values": f"0+{value:g}x20",
        }
        for name, labels, value in failed
        if name in names and labels.get("model") == "sentiment"
    ]
    total = sum(v for n, lbl, v in failed if n.startswith("nv_inference_request_") and n in names
                and lbl.get("model") == "sentiment")  # fmt: skip
    assert total == 1 + len(BAD) + INTERNAL  # every request, the failed ones included
    test = {
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "promql_expr_test": [{
                "expr": alert_expr(),
                "eval_time": "10m",
                "exp_samples": [{"labels": '{model="sentiment"}', "value": INTERNAL / total}],
            }],
        }],
    }  # fmt: skip
    path = tmp_path / "scraped.test.yaml"
    path.write_text(yaml.safe_dump(test))
    done = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
