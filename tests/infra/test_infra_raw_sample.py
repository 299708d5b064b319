"""The opt-in raw-text sample (issue 13, item 1) end to end from the plan: Triton's environment as each
cloud's stack renders it drives the real Recorder and fsspec writer (bucket paths kept, the bucket itself
replaced by fsspec's in-memory filesystem). Opt-in off (every committed stack): no text is ever written,
anywhere. Opt-in on at the largest rate the config allows: a bounded sample lands under raw-sample/, and
every object key it writes is matched by the plan's own 30-day lifecycle rule for that bucket."""

from __future__ import annotations

import json
import random
from typing import Any
from urllib.parse import urlparse

import fsspec
import numpy as np
import pytest
from infra_fixtures import Plan

from monitoring.records import Recorder, TokenizerFacts

ROWS = 2000
MAX_RAW_RATE = 0.05  # infra/config: monitoring.rawSampleRate is 0..0.05
TEXTS = [f"private tweet number {i} about my flight" for i in range(ROWS)]
LIFECYCLE = {
    "aws": ("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "-buckets-logs-lifecycle"),
    "gcp": ("gcp:storage/bucket:Bucket", "-buckets-logs"),
    "azure": ("azure-native:storage:ManagementPolicy", "-storage-logs-lifecycle"),
}


def triton_env(p: Plan) -> dict[str, str]:
    (container,) = p.one("kubernetes:apps/v1:Deployment")["inputs"]["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if e["name"].startswith("MONITORING_")}


def bucket_and_prefix(url: str) -> tuple[str, str]:
    """(bucket or container, key prefix) of s3://b/k, gs://b/k, abfs://container@account.dfs.../k."""
    u = urlparse(url)
    bucket = u.netloc.split("@", 1)[0]
    return bucket, u.path.lstrip("/")


def in_memory(url: str) -> str:
    bucket, key = bucket_and_prefix(url)
    return f"memory://{bucket}/{key}"


def lifecycle_raw_prefixes(p: Plan) -> list[tuple[str, float]]:
    """(prefix as the bucket's rule matches it, days) of the rules that expire the raw sample."""
    token, suffix = LIFECYCLE[p["cloud"]]
    inputs = p.one(token, suffix)["inputs"]
    if p["cloud"] == "aws":
        return [(r["filter"]["prefix"], r["expiration"]["days"]) for r in inputs["rules"] if "expiration" in r
                and "raw" in r["filter"].get("prefix", "")]  # fmt: skip
    if p["cloud"] == "gcp":
        return [(pre, r["condition"]["age"]) for r in inputs["lifecycleRules"] if "age" in r["condition"]
                for pre in r["condition"].get("matchesPrefixes", []) if "raw" in pre]  # fmt: skip
    return [
        (pre, r["definition"]["actions"]["baseBlob"]["delete"]["daysAfterModificationGreaterThan"])
        for r in inputs["policy"]["rules"]
        for pre in r["definition"]["filters"].get("prefixMatch", [])
        if "raw" in pre
    ]


def serve(environ: dict[str, str], seed: int) -> Recorder:
    recorder = Recorder.from_environment(
        facts=TokenizerFacts(100, 1, frozenset({0}), 8), labels=["negative", "positive"], model="sentiment",
        model_version="3", environ=environ,
    )  # fmt: skip
    recorder._rng = random.Random(seed)  # a fixed sample: the bounds below are exact for this seed
    for start in range(0, ROWS, 8):  # Triton's batches: texts [batch, 1] bytes, as the python model sees them
        batch = TEXTS[start : start + 8]
        recorder.offer(
            ids=np.tile(np.array([[1, 5, 6, 2]]), (len(batch), 1)),
            mask=np.ones((len(batch), 4), dtype=np.int64),
            probabilities=np.tile(np.array([[0.3, 0.7]]), (len(batch), 1)),
            texts=np.array([[t.encode()] for t in batch], dtype=object),
        )
    recorder.close()
    return recorder


def written(memory_root: str) -> dict[str, str]:
    fs = fsspec.filesystem("memory")
    return {path: fs.cat_file(path).decode() for path in fs.find(memory_root)}


@pytest.fixture(autouse=True)
def clean_memory_fs() -> Any:
    fs = fsspec.filesystem("memory")
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")
    yield
    fs.store.clear()


@pytest.mark.parametrize("stack", ["dev", "prod", "gcp-dev", "azure-dev"])
def test_opt_in_off_writes_records_but_never_text(plans: dict[str, Plan], stack: str) -> None:
    env = triton_env(plans[stack])
    assert env["MONITORING_RAW_SAMPLE_RATE"] == "0"  # every committed stack keeps no text
    bucket, _ = bucket_and_prefix(env["MONITORING_RECORDS_URL"])
    environ = {**env, **{k: in_memory(env[k]) for k in ("MONITORING_RECORDS_URL", "MONITORING_RAW_URL")}}
    environ["MONITORING_SAMPLE_RATE"] = "1"  # every request recorded: the most chances to leak text
    recorder = serve(environ, seed=0)
    assert recorder.raw_writer is None
    files = written(f"/{bucket}")
    assert files and all("/inference/date=" in path for path in files)
    assert sum(body.count("\n") for body in files.values()) == ROWS
    blob = "".join(files.values())
    assert "private tweet" not in blob and "flight" not in blob


@pytest.mark.parametrize("stack", ["dev", "gcp-dev", "azure-dev"])
def test_opt_in_on_writes_a_bounded_sample_under_the_prefix_the_lifecycle_rule_expires(
    plans: dict[str, Plan], stack: str
) -> None:
    p = plans[stack]
    env = triton_env(p)
    raw_bucket, raw_key = bucket_and_prefix(env["MONITORING_RAW_URL"])
    assert raw_key == "raw-sample"
    environ = {
        **env,
        "MONITORING_SAMPLE_RATE": "0",
        "MONITORING_RAW_SAMPLE_RATE": str(MAX_RAW_RATE),
        "MONITORING_RAW_URL": in_memory(env["MONITORING_RAW_URL"]),
    }
    serve(environ, seed=1)
    files = written(f"/{raw_bucket}")
    rows = [json.loads(line) for body in files.values() for line in body.splitlines()]
    # Bounded: a Binomial(2000, 0.05) sample (mean 100, sd 9.7) for this seed, never the whole traffic.
    assert 50 <= len(rows) <= 150, len(rows)
    assert all(set(r) == {"ts", "date", "model", "model_version", "text", "prediction"} for r in rows)
    assert {r["text"] for r in rows} <= set(TEXTS)
    # Object keys as the bucket sees them (Azure's rule matches "<container>/<blob name>").
    keys = [path.removeprefix(f"/{raw_bucket}/") for path in files]
    matched = [f"{raw_bucket}/{k}" for k in keys] if p["cloud"] == "azure" else keys
    assert all(k.startswith("raw-sample/date=") for k in keys), keys[:3]
    ((prefix, days),) = lifecycle_raw_prefixes(p)
    assert days == 30.0
    assert all(k.startswith(prefix) for k in matched), (prefix, matched[:3])
    # The records (no text) stay outside the raw rule: a 30-day delete must not touch them.
    assert not f"{raw_bucket}/inference/x".startswith(prefix) and not "inference/x".startswith(prefix)
