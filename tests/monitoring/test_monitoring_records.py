"""Inference records: written off the request path, bounded, dropped when the sink blocks, no text.

The end-to-end test runs the REAL tritonserver on a repository built by `serving build`, with the
records switched on through the environment variables infra sets, and reads what lands on disk.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from monitoring.records import RECORD_FIELDS, Recorder, RecordWriter, TokenizerFacts, describe
from tests.serving.conftest import start_server

TEXTS = [
    "what a great game last night",
    "my flight got cancelled again, awful",
    "ok",
    "zzqxj unknownish wørds ☃☃ here",
]


def facts(bundle: Path) -> TokenizerFacts:
    meta = json.loads((bundle / "metadata.json").read_text())
    return TokenizerFacts.from_files(str(bundle / "tokenizer" / "tokenizer.json"), meta["max_length"])


def test_a_flush_hands_the_gil_back_between_records() -> None:
    # The request thread comes back from ONNX Runtime (no GIL) and needs the GIL to answer. With a switch
    # interval far longer than the flush, only the writer's own hand-overs let another thread run while it
    # builds a batch: a thread that wants the GIL must get it between records, not after the whole batch.
    import sys

    writer = RecordWriter("memory://unused", write=lambda path, lines: None)
    ticks, stop = [0], threading.Event()

    def request_thread() -> None:
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0)

    seen: list[int] = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    other = threading.Thread(target=request_thread)
    try:
        other.start()
        time.sleep(0.01)
        writer._flush([(lambda: seen.append(ticks[0]) or {"date": "2026-12-03"}) for _ in range(64)])
    finally:
        stop.set()
        sys.setswitchinterval(old)
        other.join()
        writer.close()
    assert len(seen) == 64 and len(set(seen)) > 32, (
        f"the other thread ran {len(set(seen))} times in 64 records"
    )


def test_a_blocked_sink_does_not_block_requests_and_counts_the_drops() -> None:
    release = threading.Event()
    writer = RecordWriter("memory://unused", max_queue=8, batch=4, flush_s=0.05,
                          write=lambda path, lines: release.wait())  # fmt: skip
    recorder = Recorder(facts=TokenizerFacts(100, 1, frozenset({0}), 8), labels=["neg", "pos"], model="m",
                        model_version="1", sample_rate=1.0, writer=writer)  # fmt: skip
    done = threading.Event()

    def requests() -> None:
        for _ in range(200):
            recorder.offer(
                ids=np.array([[0, 5, 6]]), mask=np.array([[1, 1, 1]]), probabilities=np.array([[0.2, 0.8]])
            )
        done.set()

    threading.Thread(target=requests, daemon=True).start()
    # 200 offers against a sink that never returns: they all come back (the sink holds one batch of 4,
    # the queue 8), and the rest are counted as dropped instead of waiting.
    assert done.wait(timeout=30), "offer() blocked on a stuck sink"
    assert writer.dropped >= 200 - 8 - 4 and writer.written == 0
    release.set()
    writer.close()
    assert writer.written + writer.dropped == 200


def test_a_failing_sink_counts_drops_and_keeps_going(tmp_path: Path) -> None:
    calls = []

    def flaky(path: str, lines: list[str]) -> None:
        calls.append(path)
        if len(calls) == 1:
            raise OSError("bucket unreachable")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("".join(lines))

    writer = RecordWriter(str(tmp_path), batch=1, flush_s=0.01, write=flaky)
    for i in range(3):
        writer.put({"date": "2026-12-03", "i": i})
        time.sleep(0.2)
    writer.close()
    assert writer.errors == 1 and writer.dropped == 1 and writer.written == 2
    assert all("/date=2026-12-03/part-" in p for p in calls)


def test_descriptors_of_the_real_tokenizer(tiny_bundle: Path) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tiny_bundle / "tokenizer" / "tokenizer.json"))
    f = facts(tiny_bundle)
    d = describe(tok.encode("hello world").ids, f)
    assert d["n_tokens"] == 2 and d["truncated"] == 0 and d["unk_share"] == 0.0
    assert describe(tok.encode("hello world").ids, f) == d  # the projection is fixed
    long = describe(tok.encode(" ".join(["word"] * 500)).ids[: f.max_length], f)
    assert long["truncated"] == 1 and long["n_tokens"] == f.max_length - 2
    assert describe(tok.encode("hello ☃").ids, f)["unk_share"] == 0.5


@pytest.mark.parametrize(("environ", "message"), [
    ({"MONITORING_SAMPLE_RATE": "1.5"}, "between 0 and 1"),
    ({"MONITORING_SAMPLE_RATE": "half"}, "not a valid float"),
    ({"MONITORING_RAW_SAMPLE_RATE": "0.1"}, "needs MONITORING_RAW_URL"),
])  # fmt: skip
def test_bad_environment_is_a_clear_error(environ: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Recorder.from_environment(facts=TokenizerFacts(10, 1, frozenset(), 8), labels=["a", "b"], model="m",
                                  model_version="1", environ=environ)  # fmt: skip


@pytest.mark.integration
def test_real_tritonserver_writes_records_without_text(
    tiny_bundle: Path, manifest: Path, tmp_path: Path
) -> None:
    from serving.client import SentimentClient
    from serving.repository import BuildOptions, build

    repo, records = tmp_path / "models", tmp_path / "records"
    build(tiny_bundle, repo, options=BuildOptions())
    environ = {"MONITORING_SAMPLE_RATE": "1", "MONITORING_RECORDS_URL": str(records)}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in environ.items():
            mp.setenv(key, value)
        server_iter = start_server(repo)
        server = next(server_iter)
        try:
            with SentimentClient(server.http_url) as client:
                predictions = client.classify(TEXTS) + client.classify(TEXTS[:1])
                sent = TEXTS + TEXTS[:1]
                # The counters reach Triton's /metrics on the next request after a batch was written.
                deadline, metrics = time.monotonic() + 30, ""
                while time.monotonic() < deadline and not re.search(
                    r"ml_inference_records_written_total\{[^}]*\} [1-9]", metrics
                ):
                    time.sleep(0.5)
                    predictions += client.classify(["ok"])
                    sent.append("ok")
                    with urllib.request.urlopen(server.metrics_url, timeout=5) as resp:
                        metrics = resp.read().decode()
            # The quality job on the same live endpoint: the test split's labelled sample, sklearn's scores.
            from monitoring import evaluate

            quality = evaluate.run(server.http_url, manifest, tiny_bundle, rows=40)
        finally:
            server_iter.close()  # stops the server: finalize() flushes the queue
    assert quality["rows"] == 40 and set(quality["measured"]) == {"accuracy", "f1", "auc"}
    # The tiny bundle has no training metrics to compare with (a trained bundle's metadata.json has them).
    assert 0 <= quality["measured"]["accuracy"] <= 1 and quality["training"] == {}
    rows = [
        json.loads(line)
        for p in sorted(records.glob("date=*/part-*.jsonl"))
        for line in p.read_text().splitlines()
    ]
    assert len(rows) == len(sent) + 40  # every request, the evaluate job's included
    blob = json.dumps(rows)
    assert all(word not in blob for word in ("great game", "cancelled", "unknownish")), "raw text in records"
    meta = json.loads((tiny_bundle / "metadata.json").read_text())
    for row in rows:
        assert tuple(row) == RECORD_FIELDS
        assert row["model"] == meta["model_name"] and row["model_version"] == meta["model_version"]
        assert row["date"] == row["ts"][:10] and 0 < row["latency_ms"] < 60_000
        assert (records / f"date={row['date']}").is_dir()
    # Each record describes its request: the tokens the tokenizer makes, the label the client got.
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tiny_bundle / "tokenizer" / "tokenizer.json"))
    expected = sorted((describe(tok.encode(t).ids, facts(tiny_bundle))["n_tokens"], p.label, round(max(p.probabilities), 3))
                      for t, p in zip(sent, predictions, strict=True))  # fmt: skip
    got = Counter((r["n_tokens"], r["prediction"], round(r["probability"], 3)) for r in rows)
    assert not Counter(expected) - got, "a request without its record"
    assert max(r["unk_share"] for r in rows) > 0  # the snowmen are unknown to the vocabulary
    assert "ml_inference_records_written_total{" in metrics


@pytest.mark.integration
def test_records_land_in_a_real_s3_bucket_through_the_default_writer(s3_env: str, tiny_bundle: Path) -> None:
    """The production sink: fsspec resolves s3:// to s3fs (in the serving image since containers/requirements.py
    lists it) and writes date-partitioned parts to the bucket; here moto's S3 server stands in for the bucket."""
    import boto3

    boto3.client("s3").create_bucket(
        Bucket="logs", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"}
    )
    recorder = Recorder.from_environment(
        facts=facts(tiny_bundle), labels=["negative", "positive"], model="sentiment", model_version="3",
        environ={"MONITORING_SAMPLE_RATE": "1", "MONITORING_RECORDS_URL": "s3://logs/inference"},
    )  # fmt: skip
    ids = np.array([[101, 7, 8, 102, 0], [101, 9, 102, 0, 0]])
    mask = (ids > 0).astype(np.int64)
    for _ in range(5):
        recorder.offer(ids=ids, mask=mask, probabilities=np.array([[0.2, 0.8], [0.9, 0.1]]))
    recorder.close()
    assert recorder.counters == {"written": 10, "dropped": 0}
    s3 = boto3.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="logs")["Contents"]]
    assert keys and all(re.fullmatch(r"inference/date=\d{4}-\d{2}-\d{2}/part-.+\.jsonl", k) for k in keys)
    rows = [
        json.loads(line)
        for k in keys
        for line in s3.get_object(Bucket="logs", Key=k)["Body"].read().decode().splitlines()
    ]
    assert len(rows) == 10 and all(set(r) == set(RECORD_FIELDS) for r in rows)
    assert Counter(r["prediction"] for r in rows) == {"positive": 5, "negative": 5}
