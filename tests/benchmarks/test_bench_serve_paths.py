"""benchmarks.serve's side-by-side rounds start four tritonservers: one failing to start must not leave the
others running. The servers here are stand-ins (a real process each, in a session of its own, as
serving.server.TritonServer starts tritonserver); the model work is stubbed out."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from benchmarks import serve_paths

STARTED: list[subprocess.Popen[bytes]] = []


class FailingThirdServer:
    """Starts a long-lived process per server; the third start fails (not ready, port taken, Ctrl-C...)."""

    def __init__(self, repo: Path, **ports: int) -> None:
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> FailingThirdServer:
        if len(STARTED) == 2:
            raise RuntimeError("tritonserver not ready after 120 s")
        self.process = subprocess.Popen(["sleep", "120"], start_new_session=True)
        STARTED.append(self.process)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def test_a_server_failing_to_start_does_not_leave_the_others_running(monkeypatch: pytest.MonkeyPatch) -> None:
    STARTED.clear()
    monkeypatch.setattr("serving.server.TritonServer", FailingThirdServer)
    monkeypatch.setattr("serving.repository.build", lambda *a, **k: None)
    monkeypatch.setattr(serve_paths, "build_options", lambda *a: None)
    monkeypatch.setattr(serve_paths, "graph_threads", lambda *a: 1)
    monkeypatch.setattr(serve_paths, "ort_runner", lambda *a: lambda batch: None)
    monkeypatch.setattr(serve_paths, "torch_batch_forward", lambda *a: lambda batch: [None] * len(batch))
    settings: dict[str, dict[str, Any]] = {"bls": {"queue_delay_us": 1000}, "fused": {"queue_delay_us": 1000}}
    try:
        with pytest.raises(RuntimeError, match="not ready"):
            serve_paths.interleaved(
                Path("bundle"), None, ["a text"], requests=8, rounds=1, settings=settings, served="fused",
                accuracy_set=([], []),
            )  # fmt: skip
        assert len(STARTED) == 2
        assert [p.poll() is not None for p in STARTED] == [True, True], "servers left running"
    finally:
        for proc in STARTED:
            proc.kill()
            proc.wait()
