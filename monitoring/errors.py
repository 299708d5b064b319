"""One error type for bad input: the CLIs print it and exit 2."""

from __future__ import annotations


class InputError(Exception):
    """A missing file, an empty window, a schema mismatch...: the message says what to fix."""
