"""The alert path on one machine: real Prometheus + real Alertmanager + a local webhook receiver.

    with LocalAlerting(workdir, metrics_dirs=[Path("out/shifted")], for_override="0s") as stack:
        alert = stack.wait_for("ModelInputDrift", timeout_s=60)

Prometheus scrapes a small textfile exporter (the drift job's DIR/metrics.prom files, served over HTTP
as node-exporter's textfile collector would), evaluates monitoring/rules/*.yaml (with `for:` shortened,
the only change), and sends firing alerts to Alertmanager, configured by monitoring.alerting with every
receiver URL pointed at the local webhook receiver: nothing leaves 127.0.0.1. Each process runs in its
own process group on free ports and is stopped by its own pid. Used by tests/monitoring and the demo.
The metrics.prom files of `metrics_dirs` are served concatenated: they must not repeat a series.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from localservers import free_port, http_ok, start_on_free_port, stop_group
from monitoring.alerting import alertmanager_config

RULES = Path(__file__).resolve().parent / "rules"


class _Server(ThreadingHTTPServer):
    daemon_threads = True


def _serve(handler: type[BaseHTTPRequestHandler]) -> _Server:
    server = _Server(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(f"{name} not found: apt-get install prometheus prometheus-alertmanager")
    return path


class LocalAlerting:
    def __init__(
        self, workdir: Path, *, metrics_dirs: list[Path], for_override: str = "0s",
        scrape_targets: Sequence[str] = (), heartbeat: bool = False,
    ) -> None:  # fmt: skip
        """`scrape_targets`: more host:port targets scraped with honor_labels (e.g. a Pushgateway). `heartbeat`:
        Watchdog's heartbeat receiver is the local receiver's /heartbeat, pinged every ~2 s from a few seconds after
        the start (without it, Watchdog goes to no receiver, as in a stack without monitoring.heartbeatUrl)."""
        # Absolute: Prometheus resolves rule_files against its config file's folder, and a relative glob that
        # matches nothing there loads no rules without a word (make demo's runs/demo never fired an alert).
        self.workdir = Path(workdir).resolve()
        self.metrics_dirs, self.for_override = metrics_dirs, for_override
        self.scrape_targets, self.heartbeat = list(scrape_targets), heartbeat
        self.received: list[dict[str, Any]] = []
        self.procs: list[subprocess.Popen] = []
        self._servers: list[_Server] = []

    # --- the two small HTTP servers -------------------------------------------------------------
    def _exporter(self) -> _Server:
        dirs = self.metrics_dirs

        class Exporter(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = "".join(
                    (d / "metrics.prom").read_text() for d in dirs if (d / "metrics.prom").is_file()
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        return _serve(Exporter)

    def _receiver(self) -> _Server:
        received = self.received

        class Receiver(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    received.append({"path": self.path, "body": json.loads(body)})
                except json.JSONDecodeError:
                    received.append({"path": self.path, "body": body.decode(errors="replace")})
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        return _serve(Receiver)

    # --- configuration ---------------------------------------------------------------------------
    def _rules(self) -> list[str]:
        paths = []
        for src in sorted(RULES.glob("*.yaml")):
            doc = yaml.safe_load(src.read_text())
            for group in doc["groups"]:
                group["interval"] = "1s"
                for rule in group["rules"]:
                    rule["for"] = self.for_override
            dst = self.workdir / "rules" / src.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(yaml.safe_dump(doc, sort_keys=False))
            paths.append(str(dst))
        return paths

    def _alertmanager_yaml(self, hook: str) -> dict[str, Any]:
        config = alertmanager_config(
            pagerduty_routing_key="local-test-key", opsgenie_api_key="local-test-key",
            email_to=["oncall@example.eu"], email_from="alerts@example.eu",
            smarthost=f"127.0.0.1:{free_port()}", extra_webhook_url=f"{hook}/webhook",
            group_wait="1s", group_interval="1s", repeat_interval="1h",
            heartbeat_url=f"{hook}/heartbeat" if self.heartbeat else None,
            heartbeat_timing={"group_wait": "1s", "group_interval": "1s", "repeat_interval": "1s"},
        )  # fmt: skip
        for receiver in config["receivers"]:  # every pager points here too: no traffic leaves the machine
            for cfg in receiver.get("pagerduty_configs", []):
                cfg["url"] = f"{hook}/pagerduty"
            for cfg in receiver.get("opsgenie_configs", []):
                cfg["api_url"] = f"{hook}/opsgenie/"
        return config

    def _start(self, command: Callable[[int], list[str]], log: str, name: str) -> int:
        proc, port = start_on_free_port(command, self.workdir / log, name, http_ok("/-/ready"))
        self.procs.append(proc)
        return port

    def start(self) -> LocalAlerting:
        self.workdir.mkdir(parents=True, exist_ok=True)
        exporter, receiver = self._exporter(), self._receiver()
        self._servers += [exporter, receiver]
        hook = f"http://127.0.0.1:{receiver.server_address[1]}"
        am_config = self.workdir / "alertmanager.yml"
        am_config.write_text(yaml.safe_dump(self._alertmanager_yaml(hook), sort_keys=False))
        am, prom = binary("prometheus-alertmanager"), binary("prometheus")
        am_port = self._start(
            lambda port: [am, f"--config.file={am_config}", f"--storage.path={self.workdir / 'am-data'}",
                          f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
            "alertmanager.log", "alertmanager",
        )  # fmt: skip
        self.alertmanager_url = f"http://127.0.0.1:{am_port}"
        prom_config = self.workdir / "prometheus.yml"
        rules = self._rules()
        prom_config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": rules,
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
            "scrape_configs": [{"job_name": "monitoring-jobs", "honor_labels": True,
                                "static_configs": [{"targets": [f"127.0.0.1:{exporter.server_address[1]}",
                                                                *self.scrape_targets]}]}],
        }))  # fmt: skip
        # Watchdog fires at Prometheus's first evaluation, before it has discovered Alertmanager (a few seconds):
        # that send is lost, and Prometheus sends a firing alert again only after its resend delay (1m by default).
        resend = ["--rules.alert.resend-delay=1s"] if self.heartbeat else []
        # /-/ready answers once the first configuration, rule files included, is loaded.
        prom_port = self._start(
            lambda port: [prom, f"--config.file={prom_config}", f"--storage.tsdb.path={self.workdir / 'prom-data'}",
                          f"--web.listen-address=127.0.0.1:{port}", *resend],
            "prometheus.log", "prometheus",
        )  # fmt: skip
        self.prometheus_url = f"http://127.0.0.1:{prom_port}"
        self._check_rules_loaded(len(rules))
        return self

    def _check_rules_loaded(self, files: int) -> None:
        """Every rule file's groups are in Prometheus (a rule_files glob that matches nothing is not an error)."""
        with urllib.request.urlopen(f"{self.prometheus_url}/api/v1/rules", timeout=10) as response:  # noqa: S310
            loaded = {g["file"] for g in json.load(response)["data"]["groups"]}
        if len(loaded) < files:
            raise RuntimeError(
                f"Prometheus loaded rules from {len(loaded)} of {files} rule files ({sorted(loaded)}): "
                f"see {self.workdir / 'prometheus.yml'} and prometheus.log"
            )

    def alerts(self, alertname: str) -> list[dict[str, Any]]:
        """Alerts named `alertname` the webhook receiver got (Alertmanager's webhook payload `alerts`)."""
        return [
            alert
            for post in list(self.received)
            if post["path"] == "/webhook" and isinstance(post["body"], dict)
            for alert in post["body"].get("alerts", [])
            if alert.get("labels", {}).get("alertname") == alertname
        ]

    def wait_for(self, alertname: str, timeout_s: float = 60) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.alerts(alertname)
            if found:
                return found[0]
            time.sleep(0.25)
        return None

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop_group(proc)
        self.procs.clear()
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def __enter__(self) -> LocalAlerting:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
