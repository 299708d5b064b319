"""Monitoring fixtures: the serving tests' tiny bundle and tritonserver helper, reused (not redefined)."""

from __future__ import annotations

import os

os.environ.setdefault("DO_NOT_TRACK", "1")  # Evidently: no telemetry, ever

from tests.serving.conftest import start_server, tiny_bundle  # noqa: E402, F401
