"""Errors of the ONNX export (training/export*.py): each message says what to change (CLI exit 2)."""

from __future__ import annotations

from training.errors import TrainingError


class ExportError(TrainingError):
    """The export cannot produce a trustworthy bundle; the message says what to change (CLI exit 2)."""


class ParityError(ExportError):
    """The ONNX graph does not reproduce PyTorch within tolerance: no bundle is written."""
