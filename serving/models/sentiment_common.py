"""Helpers shared by the python-backend models; `build` copies this file next to each model.py
(the python backend puts the version folder on sys.path)."""

import triton_python_backend_utils as pb_utils

# `optimization.graph.level` as Triton's onnxruntime backend maps it (serving/engine_config.py ORT_GRAPH_LEVELS).
GRAPH_LEVEL_NAMES = {
    0: "ORT_ENABLE_ALL",
    1: "ORT_ENABLE_EXTENDED",
    -1: "ORT_ENABLE_BASIC",
    2: "ORT_DISABLE_ALL",
}


def invalid_argument(message):
    """A per-request error the client sees as HTTP 400 / gRPC INVALID_ARGUMENT: the caller must fix the input."""
    code = getattr(pb_utils.TritonError, "INVALID_ARG", None)
    return pb_utils.TritonError(message) if code is None else pb_utils.TritonError(message, code)


def parameters(config):
    """The model config's `parameters` as a plain {key: string value} dict."""
    return {key: value["string_value"] for key, value in config.get("parameters", {}).items()}


def ort_session(config, path):
    """An ONNX Runtime session configured from the model config as Triton's onnxruntime backend would:
    `optimization.graph.level`, `intra_op_thread_count`, `inter_op_thread_count` (+ `allow_spinning`)."""
    import onnxruntime as ort  # only the models that run a graph pay for the import

    params = parameters(config)
    options = ort.SessionOptions()
    level = int(config.get("optimization", {}).get("graph", {}).get("level", 0))
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, GRAPH_LEVEL_NAMES[level])
    # 0 = ONNX Runtime's default (all cores); set per deployment next to the instance count.
    options.intra_op_num_threads = int(params.get("intra_op_thread_count", "0"))
    options.inter_op_num_threads = int(params.get("inter_op_thread_count", "1"))
    # Spinning threads win on a dedicated node but steal the cores the tokenizer, the other stubs and
    # the server need when they share a few CPUs (measured: serving/README.md); off unless asked for.
    options.add_session_config_entry("session.intra_op.allow_spinning", params.get("allow_spinning", "0"))
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
