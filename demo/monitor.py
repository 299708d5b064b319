"""The demo's monitoring stage: records in the bucket, drift on a clean and a shifted window, the alert.

The serve stage started tritonserver with inference records on (every request sampled) and load-tested
it with texts of the held-out test split. This stage sends two windows of distinct texts through the same
server: clean (other test-split texts) and shifted (another domain). The load test's own records are not
used as a window: it repeats its first texts at each concurrency level, and repeated rows make the
small-sample tests over-confident. Then it stops the server (the record writer flushes), ships the records
into the demo's logs bucket (moto S3), runs the drift job (its CLI) on each window against the training
reference, and lets the drift alert travel through a real Prometheus and Alertmanager to a local webhook.

Why a spool folder and not the bucket directly: the python backend stub bundled in nvidia-pytriton embeds
a Python that cannot import `ssl` here, so botocore/s3fs do not load inside the model (the writer counts
the failures as drops and logs the cause). The serving image's Python has ssl and writes to the bucket
itself (MONITORING_RECORDS_URL=s3://...); locally the server writes the same files to a folder, and this
stage uploads them as a log shipper would.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

PY = sys.executable
LOGS_BUCKET = "eu-ml-demo-logs"
RECORDS_URL = f"s3://{LOGS_BUCKET}/inference"


def spool(cfg: Any) -> Path:
    return (cfg.work / "monitoring" / "spool").resolve()


def server_environment(s3_env: dict[str, str], cfg: Any) -> dict[str, str]:
    """What the serving containers get from infra (monitoring/environment.py); records to the spool folder."""
    return {**s3_env, "MONITORING_SAMPLE_RATE": "1", "MONITORING_RECORDS_URL": str(spool(cfg))}


def ship(s3: Any, cfg: Any) -> int:
    """Upload the spooled record files to the logs bucket, same layout (date=YYYY-MM-DD/part-*.jsonl)."""
    files = sorted(spool(cfg).glob("date=*/part-*.jsonl"))
    for path in files:
        s3.upload(path, LOGS_BUCKET, f"inference/{path.relative_to(spool(cfg)).as_posix()}")
    return len(files)


WINDOW_ROWS, REFERENCE_ROWS = 300, 2000
"""The sizes tests/monitoring checks for false alarms (5 clean windows) and detection."""


def clean_texts(r: Any, cfg: Any) -> Path:
    """The load test's texts: the test split (what the model was trained for, never seen in training)."""
    path = cfg.work / "monitoring" / "clean.txt"
    r.run([PY, "-m", "monitoring", "texts", "--manifest", str(cfg.train_dir / "manifest.json"),
           "--data-encoding", "latin-1", "--rows", "200", "--out", str(path)],
          timeout_s=120)  # fmt: skip
    return path


def stage_monitor(r: Any, cfg: Any, summary: dict[str, Any], s3: Any, server: Any, stop_server: Any) -> None:
    from monitoring.localstack import LocalAlerting

    with r.stage(
        "monitor", "Inference records in the bucket, drift (clean vs shifted window), alert delivery"
    ) as st:
        work, out = cfg.work / "monitoring", cfg.out / "monitoring"
        rows, manifest = WINDOW_ROWS, str(cfg.train_dir / "manifest.json")
        how = {
            "clean": ["--manifest", manifest, "--data-encoding", "latin-1", "--seed", "1"],
            "shifted": ["--shifted"],
        }
        for name, args in how.items():
            r.run([PY, "-m", "monitoring", "texts", *args, "--rows", str(rows), "--out", str(work / f"{name}.txt")],
                  timeout_s=120)  # fmt: skip
        bounds = {}
        for name in how:
            bounds[name] = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
            # No warm-up (the serve stage warmed the server): its requests repeat the window's first texts,
            # and a repeated row can land on both halves of the embedding drift's domain classifier, which
            # then recognises it: a clean window's ROC AUC rose over 0.55 in CI with 8 of them.
            r.run([PY, "-m", "serving", "loadtest", "--url", server.http_url, "--texts", str(work / f"{name}.txt"),
                   "--concurrency", "4", "--requests", str(rows), "--warmup-requests", "0",
                   "--out", str(work / f"{name}-loadtest.json")], timeout_s=300)  # fmt: skip
        stop_server()  # the record writer flushes what it holds when the model unloads
        ship(s3, cfg)
        objects = s3.list(LOGS_BUCKET, "inference/")
        if not objects:
            r.fail(f"no inference records under {RECORDS_URL}: see logs/tritonserver.log")
        reference = work / "reference.jsonl"
        r.run([PY, "-m", "monitoring", "reference", "--manifest", str(cfg.train_dir / "manifest.json"),
               "--bundle", str(cfg.train_dir / "export"), "--data-encoding", "latin-1",
               "--rows", str(REFERENCE_ROWS), "--out", str(reference)], timeout_s=300)  # fmt: skip
        results = {}
        windows = {"clean": ["--since", bounds["clean"], "--until", bounds["shifted"]],
                   "shifted": ["--since", bounds["shifted"]]}  # fmt: skip
        for name, window in windows.items():
            r.run([PY, "-m", "monitoring", "drift", "--reference", str(reference), "--current", RECORDS_URL,
                   *window, "--out", str(out / name)], timeout_s=300)  # fmt: skip
            report = json.loads((out / name / "drift.json").read_text())
            results[name] = {
                "drift_detected": report["drift_detected"],
                "score": report["score"],
                "threshold": report["threshold"],
                "records": report["current"]["rows"],
                "drifted_features": [k for k, v in report["features"].items() if v["drifted"]],
                "report": f"monitoring/{name}/drift.html",
            }
        # What the Pushgateway would hold: the latest drift job's gauges (each run replaces its group).
        with LocalAlerting(work / "alerting", metrics_dirs=[out / "shifted"]) as stack:
            r.log(f"prometheus {stack.prometheus_url}, alertmanager {stack.alertmanager_url}")
            alert = stack.wait_for("ModelInputDrift", timeout_s=60)
        summary["monitoring"] = {
            **results,
            "alert_delivered": alert is not None,
            "alert": None
            if alert is None
            else {"labels": alert["labels"], "summary": alert["annotations"]["summary"]},
            "records_url": RECORDS_URL,
            "record_objects": len(objects),
            "reference_records": REFERENCE_ROWS,
        }
        if alert is None and results["shifted"]["drift_detected"]:
            # The plumbing, not the model: a drifted window whose alert never reached the webhook is a failure.
            r.fail(
                f"the drift alert did not reach the webhook in 60 s: see {stack.workdir / 'prometheus.log'}"
            )
        st.detail = (
            f"clean: drift {results['clean']['drift_detected']} (score {results['clean']['score']}), shifted: "
            f"drift {results['shifted']['drift_detected']} (score {results['shifted']['score']}); "
            f"alert delivered: {alert is not None}"
        )
