"""Every environment variable the monitoring code reads, declared once (type, default, meaning).

The serving containers (Triton python models) and the drift CronJob get these from infra; nothing
else in monitoring/ calls os.environ. Standard library only: the Triton python models import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class EnvironmentVariable:
    name: str
    type: type
    default: Any
    doc: str

    def get(self, environ: dict[str, str] | None = None) -> Any:
        raw = (os.environ if environ is None else environ).get(self.name)
        if raw is None or raw.strip() == "":
            return self.default
        try:
            value = self.type(raw)
        except ValueError:
            raise ValueError(
                f"environment variable {self.name}={raw!r} is not a valid {self.type.__name__}: {self.doc}"
            ) from None
        if self.type is float and not 0.0 <= value <= 1.0:
            raise ValueError(f"environment variable {self.name}={raw!r} must be between 0 and 1: {self.doc}")
        return value


ENVIRONMENT_VARIABLES: list[EnvironmentVariable] = []


def _declare(name: str, type_: type, default: Any, doc: str) -> EnvironmentVariable:
    var = EnvironmentVariable(name, type_, default, doc)
    ENVIRONMENT_VARIABLES.append(var)
    return var


MONITORING_SAMPLE_RATE = _declare(
    "MONITORING_SAMPLE_RATE",
    float,
    0.0,
    "Share of requests (0..1) that get an inference record (descriptors, prediction, latency; no text). "
    "0 = records off. From the stack config (monitoring.sampleRate).",
)
MONITORING_RECORDS_URL = _declare(
    "MONITORING_RECORDS_URL",
    str,
    None,
    "fsspec URL prefix the records go to (local folder, s3://, gs://, az://), e.g. s3://<logs bucket>/inference; "
    "files land in <prefix>/date=YYYY-MM-DD/part-*.jsonl. Unset = records off.",
)
MONITORING_RAW_SAMPLE_RATE = _declare(
    "MONITORING_RAW_SAMPLE_RATE",
    float,
    0.0,
    "Share of requests (0..1) whose raw text is kept for labelling (opt-in; GDPR data minimisation: 0 by "
    "default). Goes to MONITORING_RAW_URL only, a prefix with its own short retention rule.",
)
MONITORING_RAW_URL = _declare(
    "MONITORING_RAW_URL",
    str,
    None,
    "fsspec URL prefix for the opt-in raw text sample (short-retention bucket prefix). Required when "
    "MONITORING_RAW_SAMPLE_RATE > 0.",
)
MONITORING_PUSHGATEWAY_URL = _declare(
    "MONITORING_PUSHGATEWAY_URL",
    str,
    None,
    "Pushgateway the drift/evaluate jobs and the trainer (progress stamp) push their gauges to (e.g. http://pushgateway.monitoring:9091); "
    "unset = no push (the gauges are still written to DIR/metrics.prom).",
)
MONITORING_JOB_NAME = _declare(
    "MONITORING_JOB_NAME",
    str,
    None,
    "Name of the Kubernetes Job a training run belongs to (set by `python -m training launch`): the `job_name` "
    "label of the progress stamp the trainer pushes to MONITORING_PUSHGATEWAY_URL (TrainingNoProgress joins it "
    "with kube-state-metrics' kube_job_status_active). Unset = no push.",
)
PUBSUB_EMULATOR_HOST = _declare(
    "PUBSUB_EMULATOR_HOST",
    str,
    None,
    "host:port of a Pub/Sub emulator (tests): `monitoring budget --cloud gcp` then pulls over plain HTTP without "
    "credentials instead of pubsub.googleapis.com (the variable Google's own Pub/Sub clients honour).",
)
