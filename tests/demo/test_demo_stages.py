"""The stage runner and the report, without the heavy parts: failures are named, logs kept, processes killed."""

from __future__ import annotations

import json
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from demo import report
from demo.pipeline import DemoConfig, write_outputs
from demo.stages import Runner, StageFailed


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_failing_command_names_its_stage_and_keeps_the_log(tmp_path: Path) -> None:
    r = Runner(logs=tmp_path / "logs", total=2, quiet=True)
    with r.stage("first", "First"):
        r.run([sys.executable, "-c", "print('hello')"], timeout_s=30)
    with pytest.raises(StageFailed) as err, r.stage("second", "Second"):
        r.run([sys.executable, "-c", "import sys; print('about to fail'); sys.exit(3)"], timeout_s=30)
    assert err.value.stage == "second" and "exited 3" in err.value.why
    log = (tmp_path / "logs" / "2-second.log").read_text()
    assert "about to fail" in log and "FAILED" in log
    assert [s.status for s in r.stages] == ["ok", "failed"]
    assert "hello" in (tmp_path / "logs" / "1-first.log").read_text()


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    r = Runner(logs=tmp_path / "logs", total=1, quiet=True)
    pid_file = tmp_path / "grandchild.pid"
    # The child starts a grandchild that would outlive it, then hangs while printing.
    script = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "while True:\n    print('tick', flush=True); time.sleep(0.2)\n"
    )
    start = time.monotonic()
    with pytest.raises(StageFailed, match="ran past 2 s"), r.stage("hang", "Hang"):
        r.run([sys.executable, "-c", script], timeout_s=2)
    assert time.monotonic() - start < 30
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)


def test_an_unexpected_error_is_reported_as_the_stage_failing(tmp_path: Path) -> None:
    r = Runner(logs=tmp_path / "logs", total=1, quiet=True)
    with pytest.raises(StageFailed) as err, r.stage("broken", "Broken"):
        raise KeyError("metrics")
    assert err.value.stage == "broken" and "KeyError" in (tmp_path / "logs" / "1-broken.log").read_text()


def test_charts_are_valid_svg() -> None:
    chart = report.line_chart(
        "loss", {"loss": [(0, 0.7), (10, 0.5), (20, 0.3)]}, x_label="step", y_label="loss"
    )
    root = ET.fromstring(chart)
    assert root.tag == "svg" and len(root.findall("polyline")) == 1
    rows = [{"concurrency": 1, "rps": 60, "p50_ms": 10, "p95_ms": 20, "p99_ms": 30},
            {"concurrency": 8, "rps": 130, "p50_ms": 40, "p95_ms": 60, "p99_ms": 90}]  # fmt: skip
    root = ET.fromstring(report.latency_chart(rows, slo_ms=100))
    assert len(root.findall("rect")) == 6 and len(root.findall("line[@class='slo']")) == 1
    # An SLO far above the measurements is named, not drawn (it would flatten the bars).
    root = ET.fromstring(report.latency_chart(rows, slo_ms=5000))
    assert not root.findall("line[@class='slo']") and "above the chart" in "".join(root.itertext())
    assert "no data" in report.line_chart("empty", {"x": []}, x_label="a", y_label="b")


def test_outputs_after_a_failure_still_say_where_it_stopped(tmp_path: Path) -> None:
    cfg = DemoConfig(reports=tmp_path, work=tmp_path / "work")
    cfg.out.mkdir(parents=True)
    summary = {"started": "2026-12-02T14:00:00Z", "preset": "demo", "duration_s": 12.0, "stages": [],
               "failed_stage": {"name": "serve", "why": "`python -m serving check` exited 1", "log": "x"}}  # fmt: skip
    write_outputs(cfg, summary)
    assert json.loads((cfg.out / "summary.json").read_text())["failed_stage"]["name"] == "serve"
    page = (cfg.out / "index.html").read_text()
    assert "Stopped at stage <b>serve</b>" in page and "not reached" in page


def test_missing_system_tools_stop_the_demo_before_its_first_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh machine without Debian's prometheus packages: the demo says what to install at once (exit 1,
    # summary names the preflight), instead of failing in its monitor stage after minutes of training.
    import shutil

    from demo import pipeline, stages

    real_which = shutil.which
    found = {"prometheus": "/usr/bin/prometheus", "prometheus-alertmanager": None}
    monkeypatch.setattr(stages.shutil, "which", lambda name: found.get(name, real_which(name)))
    started = []
    monkeypatch.setattr(pipeline, "stage_policy", lambda *a, **k: started.append("policy"))
    cfg = DemoConfig(reports=tmp_path / "reports", work=tmp_path / "work", fast=True, quiet=True)
    assert pipeline.run(cfg) == 1
    assert started == []
    summary = json.loads((cfg.out / "summary.json").read_text())
    assert summary["failed_stage"]["name"] == "preflight"
    assert "apt-get install -y prometheus-alertmanager" in summary["failed_stage"]["why"]
    assert "prometheus (" not in summary["failed_stage"]["why"]  # only what is missing is named
    assert "prometheus-alertmanager" in Path(summary["failed_stage"]["log"]).read_text()


def test_the_page_links_only_what_this_run_wrote(tmp_path: Path) -> None:
    """A run stopped before its policy stage linked the compliance report an earlier run left in the reports
    root (and records it never wrote), as if they were this run's."""
    cfg = DemoConfig(reports=tmp_path, work=tmp_path / "work")
    cfg.out.mkdir(parents=True)
    (tmp_path / "compliance.html").write_text("<p>last week's findings</p>")
    summary = {"started": "2026-12-02T14:00:00Z", "preset": "demo", "duration_s": 1.0, "stages": [],
               "failed_stage": {"name": "preflight", "why": "not installed: prometheus", "log": "x"}}  # fmt: skip
    write_outputs(cfg, summary)
    page = (cfg.out / "index.html").read_text()
    assert "../compliance.html" not in page and "promotion-record.json" not in page
    assert "summary.json" in page
    # Once this run's policy stage has passed, its report is linked.
    summary["stages"] = [{"number": 1, "name": "policy", "title": "Policy", "status": "ok", "seconds": 1.0,
                          "log": "logs/1-policy.log", "detail": ""}]  # fmt: skip
    write_outputs(cfg, summary)
    assert "../compliance.html" in (cfg.out / "index.html").read_text()
