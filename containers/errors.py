"""The one error type of the containers package: its message says what to do about it."""


class ContainerError(RuntimeError):
    """A build, lint or version step failed; the message names the fix."""
