"""Inference records: one small JSON line per sampled request, written off the request path.

The serving python model (serving/models/sentiment.py) calls `Recorder.offer(...)` per request;
offer() decides the sample, copies a few numbers and puts them on a bounded queue, nothing more.
A daemon thread turns them into records and appends them in batches to

    <MONITORING_RECORDS_URL>/date=YYYY-MM-DD/part-<host>-<pid>-<n>.jsonl     (fsspec: local, s3://, gs://, az://)

When the sink is slow or down the queue fills and further records are dropped and counted (`dropped`):
a request is never slowed or failed by monitoring. No raw text is written unless the opt-in raw
sample (MONITORING_RAW_SAMPLE_RATE) is on; that goes to MONITORING_RAW_URL, a prefix with its own
short retention.

Record fields (RECORD_FIELDS): ts, date, model, model_version, prediction, probability, latency_ms,
n_tokens, truncated, unk_share, emb_0..emb_{D-1}: a fixed random projection of the bag of token
ids (the same on the training reference, see `describe`), so it needs nothing from the ONNX graph.

Import-light on purpose (numpy, stdlib; fsspec only inside the writer thread): Triton's python
models import it from a copy of this package that `serving build` puts beside them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import random
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from monitoring import environment as env

EMBEDDING_DIM = 16
PROJECTION_SEED = 20261203
DESCRIPTORS = ("n_tokens", "truncated", "unk_share")
EMBEDDING = tuple(f"emb_{i}" for i in range(EMBEDDING_DIM))
RECORD_FIELDS = ("ts", "date", "model", "model_version", "prediction", "probability", "latency_ms",
                 *DESCRIPTORS, *EMBEDDING)  # fmt: skip
_projection_cache: dict[int, np.ndarray] = {}


def projection(vocab_size: int) -> np.ndarray:
    """[vocab, D] fixed Gaussian random projection (Johnson-Lindenstrauss), seeded: identical everywhere."""
    if vocab_size not in _projection_cache:
        rng = np.random.default_rng(PROJECTION_SEED)
        _projection_cache[vocab_size] = (rng.standard_normal((vocab_size, EMBEDDING_DIM)) / 4).astype(
            np.float32
        )
    return _projection_cache[vocab_size]


@dataclass(frozen=True, slots=True)
class TokenizerFacts:
    """What describe() needs to know of the tokenizer (read from its tokenizer.json)."""

    vocab_size: int
    unk_id: int
    special_ids: frozenset[int]
    max_length: int

    @classmethod
    def from_files(cls, tokenizer_json: str, max_length: int) -> TokenizerFacts:
        with open(tokenizer_json, encoding="utf-8") as fh:
            doc = json.load(fh)
        model = doc["model"]
        added = doc.get("added_tokens") or []
        ids = _piece_ids(model)
        unk_id = _unk_id(model, ids)
        # The unknown token is a special token too, but it is a word the vocabulary lacked: keep it (unk_share).
        specials = {t["id"] for t in added if t.get("special")} - {unk_id}
        # Added tokens may lie past the model's vocabulary (a team's own tokens): they are words too.
        size = max([*ids.values(), *(t["id"] for t in added)], default=-1) + 1
        return cls(size, unk_id, frozenset(specials), int(max_length))


def _piece_ids(model: dict[str, Any]) -> dict[str, int]:
    """{token: id} of a tokenizer.json `model`: WordPiece/BPE/WordLevel store a dict, Unigram (SentencePiece:
    XLM-R, multilingual-e5) a list of [piece, score] pairs whose position is the id."""
    vocab = model["vocab"]
    if isinstance(vocab, list):
        return {str(entry[0]): i for i, entry in enumerate(vocab)}
    return {str(token): int(i) for token, i in vocab.items()}


def _unk_id(model: dict[str, Any], ids: dict[str, int]) -> int:
    """The unknown token's id, or -1 when the tokenizer has none (byte-level BPE: every text is encodable, so
    unk_share stays 0). Unigram names it by id (`unk_id`), the others by token (`unk_token`)."""
    if "unk_id" in model:
        return -1 if model["unk_id"] is None else int(model["unk_id"])
    unk = model.get("unk_token")
    return ids.get(unk, -1) if unk else -1


def describe(ids: Sequence[int], facts: TokenizerFacts) -> dict[str, Any]:
    """Descriptors of one tokenized input (ids with special tokens, without padding)."""
    known = np.asarray(ids, dtype=np.int64)
    known = known[(known >= 0) & (known < facts.vocab_size)]
    words = known[~np.isin(known, list(facts.special_ids))] if facts.special_ids else known
    n = int(words.size)
    emb = projection(facts.vocab_size)[words].mean(axis=0) if n else np.zeros(EMBEDDING_DIM, np.float32)
    out: dict[str, Any] = {
        "n_tokens": n,
        "truncated": int(known.size >= facts.max_length),
        "unk_share": round(float((words == facts.unk_id).sum()) / n, 4) if n else 0.0,
    }
    out.update({name: round(float(v), 5) for name, v in zip(EMBEDDING, emb, strict=True)})
    return out


def make_record(
    *, ids: Sequence[int], facts: TokenizerFacts, labels: Sequence[str], probabilities: Sequence[float],
    model: str | None, model_version: str | None, latency_ms: float | None, ts: float,
) -> dict[str, Any]:  # fmt: skip
    best = int(np.argmax(probabilities))
    when = dt.datetime.fromtimestamp(ts, dt.UTC)
    return {
        "ts": when.isoformat(timespec="milliseconds"),
        "date": when.date().isoformat(),
        "model": model,
        "model_version": model_version,
        "prediction": labels[best],
        "probability": round(float(probabilities[best]), 5),
        "latency_ms": None if latency_ms is None else round(latency_ms, 3),
        **describe(ids, facts),
    }


def part_path(prefix: str, date: str, seq: int) -> str:
    return f"{prefix.rstrip('/')}/date={date}/part-{socket.gethostname()}-{os.getpid()}-{int(time.time())}-{seq:06d}.jsonl"


def fsspec_writer(path: str, lines: list[str]) -> None:
    import fsspec  # lazily: only the writer thread pays for it (and s3fs/gcsfs/adlfs on first use)

    with fsspec.open(path, "w", auto_mkdir=True) as fh:
        fh.write("".join(lines))


@dataclass(slots=True)
class RecordWriter:
    """Bounded queue + one daemon thread writing batches of JSON lines under `prefix`, by date."""

    prefix: str
    max_queue: int = 10_000
    batch: int = 256
    flush_s: float = 2.0
    write: Callable[[str, list[str]], None] = fsspec_writer
    dropped: int = 0
    written: int = 0
    errors: int = 0
    last_error: str | None = None
    _queue: queue.Queue = field(init=False)
    _thread: threading.Thread = field(init=False)
    _stop: threading.Event = field(init=False)
    _seq: int = 0

    def __post_init__(self) -> None:
        self._queue = queue.Queue(maxsize=self.max_queue)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="inference-records", daemon=True)
        self._thread.start()

    def put(self, item: Any) -> bool:
        """Never blocks: a full queue (slow sink) drops the item and counts it."""
        try:
            self._queue.put_nowait(item)
            return True
        except queue.Full:
            self.dropped += 1
            return False

    def _take_batch(self) -> list[Any]:
        items: list[Any] = []
        deadline = time.monotonic() + self.flush_s
        while len(items) < self.batch:
            timeout = deadline - time.monotonic()
            if timeout <= 0 or (self._stop.is_set() and self._queue.empty()):
                break
            try:
                items.append(self._queue.get(timeout=min(timeout, 0.2)))
            except queue.Empty:
                continue
        return items

    def _run(self) -> None:
        while not (self._stop.is_set() and self._queue.empty()):
            items = self._take_batch()
            if items:
                self._flush(items)

    def _flush(self, items: list[Any]) -> None:
        by_date: dict[str, list[str]] = {}
        for item in items:
            record = item() if callable(item) else item  # descriptors are computed here, off the request path
            by_date.setdefault(record.get("date") or "unknown", []).append(json.dumps(record) + "\n")
            # Hand the GIL back after each record: a batch is ~256 x 50-100 us of Python, and the request
            # thread (back from ONNX Runtime, which runs without the GIL) would otherwise wait up to the
            # interpreter's 5 ms switch interval per hand-over, which lands on the p99.
            time.sleep(0)
        for date, lines in by_date.items():
            self._seq += 1
            try:
                self.write(part_path(self.prefix, date, self._seq), lines)
                self.written += len(lines)
            except Exception as exc:  # a sink failure loses this batch, never the server
                self.errors += 1
                self.dropped += len(lines)
                if self.last_error is None:  # once: the server log says why records are missing
                    print(
                        f"inference records: writing to {self.prefix} failed: {exc!r} (cause: {exc.__cause__!r})",
                        file=sys.stderr,
                        flush=True,
                    )
                self.last_error = repr(exc)

    def close(self, timeout_s: float = 10.0) -> None:
        """Flush what is queued (bounded wait) and stop the thread."""
        self._stop.set()
        self._thread.join(timeout_s)


class Recorder:
    """The serving model's side: sample, enqueue, return. Build it with `Recorder.from_environment`."""

    def __init__(
        self, *, facts: TokenizerFacts, labels: Sequence[str], model: str, model_version: str,
        sample_rate: float, writer: RecordWriter | None, raw_sample_rate: float = 0.0,
        raw_writer: RecordWriter | None = None, rng: random.Random | None = None,
    ) -> None:  # fmt: skip
        self.facts, self.labels, self.model, self.model_version = facts, list(labels), model, model_version
        self.sample_rate = sample_rate if writer is not None else 0.0
        self.raw_sample_rate = raw_sample_rate if raw_writer is not None else 0.0
        self.writer, self.raw_writer = writer, raw_writer
        self._rng = rng or random.Random()

    @classmethod
    def from_environment(
        cls, *, facts: TokenizerFacts, labels: Sequence[str], model: str, model_version: str,
        environ: dict[str, str] | None = None,
    ) -> Recorder:  # fmt: skip
        rate, url = env.MONITORING_SAMPLE_RATE.get(environ), env.MONITORING_RECORDS_URL.get(environ)
        raw_rate, raw_url = env.MONITORING_RAW_SAMPLE_RATE.get(environ), env.MONITORING_RAW_URL.get(environ)
        if raw_rate > 0 and not raw_url:
            raise ValueError(
                "MONITORING_RAW_SAMPLE_RATE > 0 needs MONITORING_RAW_URL (its short-retention prefix)"
            )
        writer = RecordWriter(url) if rate > 0 and url else None
        raw_writer = RecordWriter(raw_url) if raw_rate > 0 and raw_url else None
        return cls(facts=facts, labels=labels, model=model, model_version=model_version, sample_rate=rate,
                   writer=writer, raw_sample_rate=raw_rate, raw_writer=raw_writer)  # fmt: skip

    @property
    def enabled(self) -> bool:
        return self.sample_rate > 0 or self.raw_sample_rate > 0

    def offer(
        self, *, ids: np.ndarray, mask: np.ndarray, probabilities: np.ndarray,
        received_ns: np.ndarray | None = None, texts: np.ndarray | None = None,
    ) -> None:  # fmt: skip
        """One request's rows ([batch, seq] ids/mask, [batch, labels] probabilities). Never raises."""
        try:
            now = time.time()
            for row in range(probabilities.shape[0]):
                if self.writer is not None and self._rng.random() < self.sample_rate:
                    kept = ids[row][mask[row] > 0].tolist()
                    probs = probabilities[row].tolist()
                    latency = (
                        (time.time_ns() - int(received_ns[row].reshape(-1)[0])) / 1e6
                        if received_ns is not None
                        else None
                    )
                    self.writer.put(
                        lambda kept=kept, probs=probs, latency=latency: make_record(
                            ids=kept, facts=self.facts, labels=self.labels, probabilities=probs,
                            model=self.model, model_version=self.model_version, latency_ms=latency, ts=now,
                        )
                    )  # fmt: skip
                if (
                    self.raw_writer is not None
                    and texts is not None
                    and self._rng.random() < self.raw_sample_rate
                ):
                    raw = texts.reshape(-1)[row]
                    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                    label = self.labels[int(np.argmax(probabilities[row]))]
                    when = dt.datetime.fromtimestamp(now, dt.UTC)
                    self.raw_writer.put({"ts": when.isoformat(timespec="milliseconds"), "date": when.date().isoformat(),
                                         "model": self.model, "model_version": self.model_version,
                                         "text": text, "prediction": label})  # fmt: skip
        except Exception:  # monitoring must never fail a request
            if self.writer is not None:
                self.writer.dropped += 1

    @property
    def counters(self) -> dict[str, int]:
        w = self.writer
        return {"written": w.written if w else 0, "dropped": w.dropped if w else 0}

    def close(self) -> None:
        for w in (self.writer, self.raw_writer):
            if w is not None:
                w.close()
