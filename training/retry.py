"""Retries for object-storage reads and checkpoint writes: exponential backoff with full jitter (tenacity).

The fsspec backends retry a little on their own (botocore's standard mode, gcsfs's and the Azure SDK's
policies), but over seconds, not over the minute a regional blip or a throttling spell lasts. Every
operation of the checkpoint store and of the data reader goes through ``call``: a transient error (a
refused or reset connection, a timeout, a 5xx/429) is retried with random exponential waits until
TRAINING_STORAGE_RETRY_S have passed, then ``StorageUnavailable`` (exit 69) names the URI and the cause.
Errors that retrying cannot fix (missing object, access denied, bad request) are raised at once; a refusal
(no credentials, access denied) as ``StorageAccessDenied`` (exit 2) naming the URI and what to set.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from training.errors import StorageAccessDenied, StorageUnavailable

log = logging.getLogger("training")
T = TypeVar("T")

# Not transient: the object is not there, or we may not touch it. Retrying would only delay the real error.
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)
# Transient error classes of the SDKs under fsspec, by module and name (the SDKs stay lazily imported).
_TRANSIENT_NAMES = (
    "EndpointConnectionError",  # botocore: connection refused / DNS
    "ConnectionClosedError",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "ClientConnectorError",  # aiohttp (s3fs, gcsfs, adlfs transports)
    "ServerDisconnectedError",
    "ClientOSError",
    "ServiceRequestError",  # azure.core: the request never got an answer
    "ServiceResponseError",
    "RetryError",  # gcsfs gave up its own retries
)
_TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}
# Refusals: the store answered, but not to these credentials. botocore's credential errors are no OSError, so
# they escaped as a traceback (exit 1) at the first read or listing; they are exit 2 with the fix instead.
_CREDENTIAL_NAMES = (
    "NoCredentialsError",  # botocore: nothing in the environment, ~/.aws or the instance/pod identity
    "PartialCredentialsError",
    "CredentialRetrievalError",
    "NoAuthTokenError",
    "DefaultCredentialsError",  # google-auth (gcsfs)
    "RefreshError",
    "ClientAuthenticationError",  # azure-core (adlfs): bad key or token, 401/403
    "CredentialUnavailableError",  # azure-identity
)
_REFUSED_STATUS = {401, 403}
CREDENTIALS_FIX = (
    "give this machine credentials allowed to use it (AWS: AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; GCP: GOOGLE_APPLICATION_CREDENTIALS; Azure: "
    "AZURE_STORAGE_CONNECTION_STRING; on the cluster: the trainer service account's workload identity), "
    "or fix the URI"
)


def object_store(uri: str) -> bool:
    """A URL of an object store (s3://, gs://, az://, ...), not a path or a file:// URL of this machine."""
    return "://" in uri and not uri.startswith("file://")


def local_path(uri: str) -> Path | None:
    """The path of this machine that `uri` names (a plain path, or a file:// URL), None for an object store.

    As fsspec reads a file:// URL: the prefix dropped, nothing unquoted (`file:///data/x` is /data/x). A check
    that a local input exists must use this: `Path("file:///data/x")` never exists, and skipping every "://"
    skipped file:// inputs, which the steps then failed to find."""
    if object_store(uri):
        return None
    return Path(uri.removeprefix("file://"))


def is_transient(exc: BaseException) -> bool:
    """True for errors a later attempt may not see (network, timeouts, throttling, 5xx)."""
    if isinstance(exc, _PERMANENT):
        return False
    for err in (exc, exc.__cause__, exc.__context__):
        if err is None:
            continue
        if type(err).__name__ in _TRANSIENT_NAMES:
            return True
        status = getattr(err, "code", None) or getattr(err, "status_code", None)
        if isinstance(status, int) and status in _TRANSIENT_STATUS:
            return True
        if isinstance(err, (ConnectionError, TimeoutError)):
            return True
    # s3fs maps botocore errors to OSError subclasses; a bare OSError from a backend is an I/O failure.
    return type(exc) is OSError


def refusal(exc: BaseException) -> str | None:
    """What the store refused (missing or rejected credentials, no permission), or None for any other error."""
    for err in (exc, exc.__cause__, exc.__context__):
        if err is None:
            continue
        name = type(err).__name__
        if name in _CREDENTIAL_NAMES:
            return f"no usable credentials ({name}: {err})"
        if isinstance(err, PermissionError):
            return f"access denied ({err})"
        status = getattr(err, "code", None) or getattr(err, "status_code", None)
        if isinstance(status, int) and status in _REFUSED_STATUS:
            return f"access denied (HTTP {status}: {err})"
    return None


def budget_s() -> float:
    from training.environment import TRAINING_STORAGE_RETRY_S

    return float(TRAINING_STORAGE_RETRY_S.get() or 0.0)


def call(uri: str, operation: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` retried on transient storage errors; StorageUnavailable when the budget is spent."""
    import tenacity

    budget = budget_s()
    started = time.monotonic()

    def _log(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "object storage %s: %s failed (%s: %s); retry %d in %.1f s",
            uri,
            operation,
            type(exc).__name__,
            exc,
            state.attempt_number,
            state.next_action.sleep if state.next_action else 0.0,
        )

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_transient),
        # Full jitter: ranks and pods that lost the store together do not retry in lockstep.
        wait=tenacity.wait_random_exponential(multiplier=0.5, max=min(30.0, max(budget / 4, 1.0))),
        stop=tenacity.stop_after_delay(budget),
        before_sleep=_log,
        reraise=True,
    )
    try:
        return retrying(fn, *args, **kwargs)
    except Exception as exc:
        if is_transient(exc):
            raise StorageUnavailable(uri, operation, exc, time.monotonic() - started) from exc
        problem = refusal(exc)
        if problem is not None:
            raise StorageAccessDenied(uri, operation, problem, CREDENTIALS_FIX) from exc
        raise
