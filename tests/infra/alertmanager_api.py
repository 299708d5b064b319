"""A stack's alertmanager.yml in a real Alertmanager, started on a free loopback port for one question: given
these firing alerts, which does it send (active) and which do its inhibit rules hold back (suppressed)?"""

from __future__ import annotations

import datetime as dt
import json
import shutil
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
        with urllib.request.urlopen(api, timeout=5) as got:  # noqa: S310 (loopback)
            received = json.load(got)
    finally:
        stop_group(proc)
    return {(a["labels"]["alertname"], a["labels"]["environment"]): a["status"]["state"] for a in received}
