"""One day for every waiver judge: a waiver holds through its `expires` day in UTC.

The gate (`policies.analyze`), the pack under `pulumi preview` (`policies.pack`) and promotion's policy-clean gate
took "today" from date.today(), the machine's local date. At 23:30 UTC, 00:30 of the next day in Europe/Madrid, a
CI runner in UTC judged a waiver ending that day as holding and a laptop in Madrid as ended: the same report passed
promotion on one and failed on the other, and `make policy` wrote different results.

The clock is set through time.time(), which date.today() reads as well: the old code and the new one see the same
instant, and TZ makes this process a Madrid laptop.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import policy_fixtures as fx
import pytest
import yaml

from policies import analyze, waivers
from promotion import evidence, gates
from promotion.config import load_config

UTC_DAY = dt.date(2026, 12, 7)
CLOCK = dt.datetime(2026, 12, 7, 23, 30, tzinfo=dt.UTC)  # 2026-12-08 00:30 in Europe/Madrid (CET)


@pytest.fixture
def madrid_laptop(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process in Europe/Madrid at CLOCK."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Madrid"
    time.tzset()
    monkeypatch.setattr(time, "time", CLOCK.timestamp)
    try:
        assert dt.date.today() == UTC_DAY + dt.timedelta(days=1)  # the local date: already tomorrow
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def waiver(expires: dt.date) -> dict[str, object]:
    return {
        "rule": "network-no-open-ingress", "finding": "violation", "stacks": ["dev"], "resources": ["open-sg"],
        "justification": "bastion behind the corporate VPN", "approver": "ENS officer <ens@example.eu>",
        "expires": expires.isoformat(),
    }  # fmt: skip


@pytest.mark.usefixtures("madrid_laptop")
def test_policies_and_promotion_judge_on_the_same_utc_day() -> None:
    """The rule is written twice (the training image that runs promotion ships no policies/): both say the same."""
    assert waivers.utc_today() == evidence.utc_today() == UTC_DAY
    (w,) = waivers.parse([waiver(UTC_DAY)], today=UTC_DAY)
    finding = {"enforcement": "mandatory", "waiver": w.as_dict()}
    assert w.active(waivers.utc_today()) and not evidence.lapsed_waivers([finding], evidence.utc_today())
    (w,) = waivers.parse([waiver(UTC_DAY - dt.timedelta(days=1))], today=UTC_DAY)
    finding = {"enforcement": "mandatory", "waiver": w.as_dict()}
    assert not w.active(waivers.utc_today()) and evidence.lapsed_waivers([finding], evidence.utc_today())


@pytest.mark.usefixtures("madrid_laptop")
def test_the_gate_takes_the_utc_day_when_no_date_is_given(tmp_path: Path) -> None:
    """`policies.analyze` without --today judges every waiver on the UTC day: here the one-year limit, which it
    checks before the pack starts (none is started: the waivers are refused first). On the Madrid laptop it used
    to count from 2026-12-08 and let through a waiver the CI runner refuses."""
    plan = fx.aws_stack("dev", "dev")
    (tmp_path / "dev.json").write_text(json.dumps(plan))
    too_far = UTC_DAY + waivers.MAX_VALIDITY + dt.timedelta(days=1)  # 2027-12-09
    (tmp_path / "waivers.yaml").write_text(yaml.safe_dump({"waivers": [waiver(too_far)]}, sort_keys=False))
    with pytest.raises(analyze.PlanError, match="expires 2027-12-09 is more than one year after 2026-12-07"):
        analyze.run(
            [tmp_path / "dev.json"], tmp_path / "out", waivers_path=tmp_path / "waivers.yaml",
            python=tmp_path / "no-pack-python",
        )  # fmt: skip
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("madrid_laptop")
def test_promotion_gate_keeps_a_waiver_through_its_utc_day() -> None:
    """policy-clean without `today` (as `python -m promotion` calls it): the waiver ending on the UTC day holds
    on a Madrid laptop at 00:30 (it used to fail the gate there and pass on the CI runner); the day before ended."""
    env = load_config().environment("dev")

    def report(expires: dt.date) -> dict[str, object]:
        found = {"policy": "network-no-open-ingress", "urn": "urn:x::open-sg", "enforcement": "mandatory"}
        return {
            "stack": env.stack,
            "violations": [],
            "waived": [{**found, "waiver": {"id": 1, **waiver(expires)}}],
        }

    assert gates.policy_clean(report(UTC_DAY), env).status == "pass"
    ended = gates.policy_clean(report(UTC_DAY - dt.timedelta(days=1)), env)
    assert ended.status == "fail" and "has ended by 2026-12-07" in ended.detail, ended
