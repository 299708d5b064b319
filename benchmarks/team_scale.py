"""A team's data and history after a year, scaled down to run in about a minute on 2 shared cores.

    python -m benchmarks.team_scale                      # defaults below, ~1 minute
    python -m benchmarks.team_scale --rows 1500000 --files-per-day 400 --records 1000   # the real shape, ~10 min

Writes reports/bench/team_scale.json. Each phase runs in its own process (its peak RSS is its own) on seeded
synthetic data of the real shape, generated under a temporary folder:
- `drift_listing`: a records prefix of 365 daily date= partitions of `--files-per-day` part files; the files a 24h
  window reads and the entries listed to find them (every key of the prefix before the listing was bounded).
- `window_read`: monitoring/windows.py `load` of a 24h window of `--window-records` inference records (real shape:
  ts, prediction, descriptors, 16 embedding values, rounded as serving writes them) in files of 2,560 under two
  date= partitions, three quarters of them inside the window: rows kept, seconds, peak RSS over the RSS before the read.
- `data_load`: training/data.py `load` of a `--rows` CSV (3 labels, 3% retweet copies), no cache: seconds, peak
  RSS, manifest hash (the same for the same data and code).
- `tokenize`: training/features.py `encode` of `--tokenize-rows` texts with the MiniLM tokenizer: seconds and the
  RSS it adds (one tokenizer call over a whole split held Python lists of every row's ids, mask and type ids).
- `promotion_walk`: staging's sequence gates against a dev history of `--records` promotions of other bundles:
  record files read (each record once, not once per gate).

Measured on the development machine (2 cores, shared with a CI run), before -> after the fixes of 2026-12-07:
- this script's defaults: drift listing 14,965 entries listed (0.117 s) -> 445 (0.005 s); data.load of 200,000 rows
  3.95 s -> 2.41 s (same manifest sha256); encode of 50,000 texts +742 MB RSS -> +150 MB (same ids sha256);
  promotion walk 2,000 record reads -> 1,000 (2 gates; `evaluate` also runs the recorded load test: 3,000 -> 1,000).
- window_read (2026-12-07, --window-records 300000): +1,199 MB RSS over the process before the read -> +104 MB
  (225,000 records in the window, a 57 MB frame), 17.5 s -> 18.4 s: no dict per record (monitoring/windows.py).
- the real shape: 365 x 400 local part files listed in 1.19 s -> 0.06 s; moto's S3 server, 365 x 50 keys: 21 list
  requests, 18,252 entries, 5.0 s -> 5 requests, 467 entries, 0.15 s; data.load of 1.5 M rows (186 MB) 33.7 s ->
  20.6 s, same manifest, peak RSS 1.5 GB both; encode of 200,000 texts +2,986 MB RSS in 19.9 s -> +256 MB in 15.0 s
  (a 1.14 M-row train split: ~17 GB -> ~0.3 GB), same ids.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PHASES = ("drift_listing", "window_read", "data_load", "tokenize", "promotion_walk")


def _rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _rss_now_mb() -> int:
    """This process's RSS now (Linux), not its peak: a phase's own peak is _rss_mb() minus this."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) // 1024


def _write_csv(path: Path, rows: int) -> None:
    rng = random.Random(0)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        for _ in range(20000)
    ]
    prev = ""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["text", "label"])
        for i in range(rows):
            text = (
                f"RT @user: {prev}"
                if i and rng.random() < 0.03
                else " ".join(rng.choices(words, k=rng.randint(5, 30)))
            )
            prev = text
            out.writerow([text, rng.choice(["negative", "positive", "neutral"])])


def drift_listing(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    import fsspec.implementations.local as local
    import pandas as pd

    from monitoring import windows

    end = dt.date(2026, 12, 5)
    for d in range(365):
        part = work / "records" / f"date={end - dt.timedelta(days=d)}"
        part.mkdir(parents=True)
        for f in range(args.files_per_day):
            (part / f"part-h-1-{f:06d}.jsonl").write_text("{}\n")
    listed = [0]
    real_ls = local.LocalFileSystem.ls

    def counted(self: Any, path: str, detail: bool = False, **kwargs: Any) -> Any:
        found = real_ls(self, path, detail=detail, **kwargs)
        listed[0] += len(found)
        return found

    local.LocalFileSystem.ls = counted  # type: ignore[method-assign]
    since = windows.parse_time(windows.window_start("24h", pd.Timestamp("2026-12-05T12:00:00Z")), "--since")
    start = time.perf_counter()
    files = windows._files(str(work / "records"), since)
    return {"partitions": 365, "part_files": 365 * args.files_per_day, "window_files": len(files),
            "entries_listed": listed[0], "seconds": round(time.perf_counter() - start, 3)}  # fmt: skip


def window_read(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    import pandas as pd

    from monitoring import windows
    from monitoring.records import EMBEDDING

    rng = random.Random(0)
    start, per_file, n = dt.datetime(2026, 12, 4, 12, tzinfo=dt.UTC), 2560, args.window_records
    for first in range(0, n, per_file):
        lines, day = [], ""
        for i in range(first, min(first + per_file, n)):
            when = start + dt.timedelta(seconds=i * 86_400 / n)  # a day of records, evenly spread
            day = when.date().isoformat()
            record = {"ts": when.isoformat(timespec="milliseconds"), "date": day, "model": "sentiment",
                      "model_version": "3", "prediction": rng.choice(["negative", "positive"]),
                      "probability": round(rng.uniform(0.5, 1), 5), "latency_ms": round(rng.uniform(3, 80), 3),
                      "n_tokens": rng.randint(3, 60), "truncated": 0, "unk_share": round(rng.random() * 0.05, 4),
                      **{e: round(rng.gauss(0, 0.3), 5) for e in EMBEDDING}}  # fmt: skip
            lines.append(json.dumps(record) + "\n")
        part = work / "records" / f"date={day}"
        part.mkdir(parents=True, exist_ok=True)
        (part / f"part-h-1-{first:08d}.jsonl").write_text("".join(lines))
    since = windows.window_start("24h", pd.Timestamp("2026-12-05T18:00:00Z"))
    windows.load(str(next((work / "records").rglob("*.jsonl"))))  # pandas, fsspec and json warmed up
    before = _rss_now_mb()
    begin = time.perf_counter()
    frame = windows.load(str(work / "records"), since=since)
    return {"records": n, "rows": len(frame), "seconds": round(time.perf_counter() - begin, 2),
            "rss_before_mb": before, "peak_rss_mb": _rss_mb(), "added_rss_mb": _rss_mb() - before,
            "frame_mb": round(frame.memory_usage(deep=True).sum() / 2**20, 1)}  # fmt: skip


def data_load(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    from training import data
    from training.config import DataConfig

    path = work / "train.csv"
    _write_csv(path, args.rows)
    before = _rss_mb()
    start = time.perf_counter()
    ds = data.load(DataConfig(source=str(path), labels=("negative", "positive", "neutral")), use_cache=False)
    return {"rows": args.rows, "bytes": path.stat().st_size, "seconds": round(time.perf_counter() - start, 2),
            "peak_rss_mb": _rss_mb(), "rss_before_mb": before, "manifest_sha256": ds.manifest["sha256"],
            "splits": {n: s["rows"] for n, s in ds.manifest["splits"].items()}}  # fmt: skip


def tokenize(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    import hashlib

    from training import features
    from training.config import ModelConfig
    from training.model import load_tokenizer

    path = work / "tok.csv"
    _write_csv(path, args.tokenize_rows)
    with open(path, newline="", encoding="utf-8") as fh:
        texts = [row["text"] for row in csv.DictReader(fh)]
    tok = load_tokenizer(ModelConfig())
    before = _rss_mb()
    start = time.perf_counter()
    enc = features.encode(tok, texts, [0] * len(texts), 128)
    digest = hashlib.sha256(enc.ids.tobytes() + enc.offsets.tobytes()).hexdigest()
    return {"texts": len(texts), "tokens": int(enc.offsets[-1]), "seconds": round(time.perf_counter() - start, 2),
            "added_rss_mb": _rss_mb() - before, "ids_sha256": digest}  # fmt: skip


def promotion_walk(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    from collections import Counter

    from promotion import sequence
    from promotion import store as store_module
    from promotion.config import load_config

    store = store_module.ModelStore(str(work / "store"), "team-model")
    events = []
    for i in range(args.records):
        record = {
            "record_id": f"r{i:05d}",
            "lineage": {"bundle_metadata_sha256": f"b{i}"},
            "deployable": True,
        }
        store.write_record(record, "card")
        events.append({"action": "promote", "version": str(i), "record_id": record["record_id"]})
    Path(store.history_uri("dev")).parent.mkdir(parents=True)
    Path(store.history_uri("dev")).write_text(
        json.dumps({"format_version": 1, "environment": "dev", "events": events})
    )
    reads: Counter[str] = Counter()
    real = store_module.read_bytes

    def counted(uri: str) -> bytes | None:
        reads[uri] += 1
        return real(uri)

    store_module.read_bytes = counted  # type: ignore[assignment]
    staging = load_config().environment("staging")
    fresh = store_module.ModelStore(store.root, store.model)  # one command's store, as the CLI makes it
    start = time.perf_counter()
    sequence.promoted_from(fresh, staging, "never-in-dev")
    sequence.loadtest_source(fresh, staging, "never-in-dev", None)
    record_reads = sum(n for uri, n in reads.items() if "/records/" in uri)
    return {
        "records": args.records,
        "record_reads": record_reads,
        "seconds": round(time.perf_counter() - start, 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--tokenize-rows", type=int, default=50_000)
    p.add_argument("--files-per-day", type=int, default=40)
    p.add_argument("--records", type=int, default=1000)
    p.add_argument("--window-records", type=int, default=300_000)
    p.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=Path("reports/bench/team_scale.json"))
    args = p.parse_args(argv)
    if args.phase:
        with tempfile.TemporaryDirectory(prefix="team-scale-") as tmp:
            print(json.dumps(globals()[args.phase](Path(tmp), args)))
        return 0
    report: dict[str, Any] = {}
    for phase in PHASES:
        child = [sys.executable, "-m", "benchmarks.team_scale", "--phase", phase, "--rows", str(args.rows),
                 "--tokenize-rows", str(args.tokenize_rows), "--files-per-day", str(args.files_per_day),
                 "--records", str(args.records), "--window-records", str(args.window_records)]  # fmt: skip
        done = subprocess.run(child, capture_output=True, text=True, check=True)
        report[phase] = json.loads(done.stdout.strip().splitlines()[-1])
        print(phase, report[phase], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
