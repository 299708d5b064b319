"""A stack's alertmanager.yml in a real Alertmanager, started on a free loopback port for one question: given
these firing alerts, which does it send (active) and which do its inhibit rules hold back (suppressed)?"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml


def alert_states(
    document: dict[str, Any], alerts: list[dict[str, str]], tmp_path: Path
) -> dict[tuple[str, str], str]:
    """Posts each label set in `alerts` as firing now; returns {(alertname, environment): state}."""
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if binary is None:
        pytest.skip("Alertmanager is missing: apt-get install prometheus-alertmanager")
    from localservers import http_ok, start_on_free_port, stop_group

    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(document))
    proc, port = start_on_free_port(
        lambda port: [binary, f"--config.file={tmp_path / 'alertmanager.yml'}",
                      f"--storage.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                      "--cluster.listen-address="],
        tmp_path / "alertmanager.log", "alertmanager", http_ok("/-/ready"),
    )  # fmt: skip
    try:
        api = f"http://127.0.0.1:{port}/api/v2/alerts"
        now = dt.datetime.now(dt.UTC).isoformat()
        body = json.dumps([{"labels": labels, "startsAt": now} for labels in alerts]).encode()
        post = urllib.request.Request(api, body, {"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(post, timeout=5).close()  # noqa: S310 (loopback)
        return _settled(api, len(alerts))
    finally:
        stop_group(proc)


def _settled(api: str, expected: int, attempts: int = 20) -> dict[tuple[str, str], str]:
    """The states once two reads 0.25 s apart agree. Alertmanager's inhibitor learns of a source alert from a
    subscription of its own, after the POST has returned: a GET right away could see the target still active
    (it failed that way once in CI, 1 run in many)."""
    previous: dict[tuple[str, str], str] | None = None
    for _ in range(attempts):
        with urllib.request.urlopen(api, timeout=5) as got:  # noqa: S310 (loopback)
            received = json.load(got)
        states = {
            (a["labels"]["alertname"], a["labels"]["environment"]): a["status"]["state"] for a in received
        }
        if len(states) == expected and states == previous:
            return states
        previous = states
        time.sleep(0.25)
    raise AssertionError(f"Alertmanager's alert states did not settle in {attempts * 0.25:.0f} s: {previous}")
