"""The run's cost record: instance-hours x price (on-demand and spot) plus checkpoint storage.

Prices come from the committed table training/prices.json (its ``as_of`` date and sources
are copied into every record, so a stale table shows).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PRICES = Path(__file__).with_name("prices.json")


def load_prices(path: Path = PRICES) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def record(
    *,
    cloud: str,
    region: str,
    instance_type: str,
    nodes: int,
    wall_seconds: float,
    storage_bytes: int,
    prices: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """cost.json: what the run cost, or what is unknown about it (a missing price is null, never a guess)."""
    table = prices or load_prices()
    hours = wall_seconds / 3600.0
    entry = table["instances"].get(cloud, {}).get(region, {}).get(instance_type)
    gb_month = table["storage_gb_month"].get(cloud)
    # Checkpoints live as long as the bucket's lifecycle rule keeps them; price one month.
    storage = None if gb_month is None else storage_bytes / 1e9 * gb_month
    out: dict[str, Any] = {
        "cloud": cloud,
        "region": region,
        "instance_type": instance_type,
        "nodes": nodes,
        "wall_seconds": round(wall_seconds, 3),
        "instance_hours": round(hours * nodes, 6),
        "gpus_per_instance": entry["gpus"] if entry else None,
        "price_per_hour": {"on_demand": entry["on_demand"], "spot": entry["spot"]} if entry else None,
        "compute": None,
        "storage_bytes": storage_bytes,
        "storage_per_month": None if storage is None else round(storage, 6),
        "total": None,
        "currency": table["currency"],
        "prices_as_of": table["as_of"],
        "sources": table["sources"],
    }
    if entry:
        compute = {k: round(hours * nodes * entry[k], 6) for k in ("on_demand", "spot")}
        out["compute"] = compute
        out["total"] = {k: round(v + (storage or 0.0), 6) for k, v in compute.items()}
    else:
        out["note"] = (
            f"no price for {cloud}/{region}/{instance_type} in training/prices.json: add it to get a total"
        )
    return out
