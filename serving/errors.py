"""One place for the errors serving raises; each message says how to fix the problem."""

from __future__ import annotations


class ServingError(Exception):
    """Base class: every error `python -m serving` turns into a one-line message and exit code 2."""


class ConfigError(ServingError, ValueError):
    """A model configuration value Triton would reject (or that would not do what is meant)."""


class BundleError(ServingError):
    """The export bundle is missing a file or its metadata does not match the contract."""


class ServerError(ServingError):
    """The local tritonserver could not be found, started or made ready."""


class PortInUseError(ServerError):
    """A port the server needs is already taken by another process."""

    def __init__(self, port: int, role: str, host: str) -> None:
        self.port, self.role, self.host = port, role, host
        super().__init__(
            f"{role} port {port} on {host} is already in use: pass --{role}-port with a free port "
            f"(or stop the process listening there, e.g. `ss -ltnp 'sport = :{port}'`)"
        )


class PortsTakenError(ServerError):
    """tritonserver found a port taken when it bound it (after the check before its start passed)."""


class InferenceError(ServingError):
    """The server answered a request with an error (bad input, or the model failed)."""


class RequestTimeoutError(InferenceError):
    """The server did not answer within the client's timeout (not retried: it may be overloaded)."""


class UnavailableError(InferenceError):
    """The server stayed unreachable/unavailable after every retry."""
