"""Helpers shared by the python-backend models; `build` copies this file next to each model.py
(the python backend puts the version folder on sys.path)."""

import triton_python_backend_utils as pb_utils


def invalid_argument(message):
    """A per-request error the client sees as HTTP 400 / gRPC INVALID_ARGUMENT: the caller must fix the input."""
    code = getattr(pb_utils.TritonError, "INVALID_ARG", None)
    return pb_utils.TritonError(message) if code is None else pb_utils.TritonError(message, code)


def parameters(config):
    """The model config's `parameters` as a plain {key: string value} dict."""
    return {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
