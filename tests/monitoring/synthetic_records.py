"""Inference records as monitoring/records.py writes them, synthesized (no model): for the input checks."""

from __future__ import annotations

import json
import random
from pathlib import Path

from monitoring.records import EMBEDDING


def record(i: int, rng: random.Random, **override: object) -> dict:
    row: dict = {
        "ts": f"2026-12-03T10:{i // 60:02d}:{i % 60:02d}Z", "date": "2026-12-03", "model": "sentiment",
        "model_version": "1", "prediction": rng.choice(["negative", "positive"]), "probability": rng.random(),
        "latency_ms": 3.0, "n_tokens": rng.randint(3, 40), "truncated": 0, "unk_share": 0.0,
        **{name: rng.gauss(0, 1) for name in EMBEDDING},
    }  # fmt: skip
    row.update(override)
    return row


def write(path: Path, rows: list[dict], first_line: str | None = None) -> Path:
    lines = ([first_line] if first_line else []) + [json.dumps(r) for r in rows]
    path.write_text("".join(line + "\n" for line in lines))
    return path
