"""The cost record comes from the committed price table, and says when a price is missing."""

from __future__ import annotations

from training import cost


def test_cost_is_hours_times_price_plus_storage() -> None:
    prices = cost.load_prices()
    entry = prices["instances"]["aws"]["eu-west-1"]["g5.xlarge"]
    rec = cost.record(
        cloud="aws",
        region="eu-west-1",
        instance_type="g5.xlarge",
        nodes=2,
        wall_seconds=1800,
        storage_bytes=2_000_000_000,
    )
    assert rec["instance_hours"] == 1.0
    assert rec["compute"]["on_demand"] == round(entry["on_demand"], 6)
    assert rec["compute"]["spot"] < rec["compute"]["on_demand"]
    storage = 2 * prices["storage_gb_month"]["aws"]
    assert abs(rec["total"]["spot"] - (entry["spot"] + storage)) < 1e-6
    assert rec["prices_as_of"] == prices["as_of"] and rec["sources"]


def test_unknown_instance_has_no_invented_price() -> None:
    rec = cost.record(
        cloud="aws",
        region="eu-west-1",
        instance_type="p5.48xlarge",
        nodes=1,
        wall_seconds=60,
        storage_bytes=0,
    )
    assert rec["compute"] is None and rec["total"] is None
    assert "prices.json" in rec["note"]
