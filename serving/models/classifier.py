"""Triton python-backend model `classifier`: the local stand-in for Triton's onnxruntime backend.

Same model.onnx, tensor names, shapes, dtypes, batching, threads and graph optimisation level as the
production config (`platform: "onnxruntime_onnx"`); only `backend: "python"` differs (`build --backend
python`). It exists because the onnxruntime backend ships only in NVIDIA's container images.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from sentiment_common import invalid_argument, ort_session


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = ort_session(config, path)  # graph level, threads, spinning: from this config
        self.inputs = {i["name"]: pb_utils.triton_string_to_numpy(i["data_type"]) for i in config["input"]}
        self.outputs = {o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in config["output"]}

    def _arrays(self, request):
        arrays = {}
        for name, dtype in self.inputs.items():
            array = pb_utils.get_input_tensor_by_name(request, name).as_numpy()
            arrays[name] = array.astype(dtype, copy=False)
        shapes = {a.shape for a in arrays.values()}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise ValueError(f"inputs must share one [batch, sequence] shape, got {sorted(shapes)}")
        return arrays

    def execute(self, requests):
        responses = [None] * len(requests)
        good = []
        for i, request in enumerate(requests):
            try:
                good.append((i, self._arrays(request)))
            except ValueError as exc:
                responses[i] = pb_utils.InferenceResponse(output_tensors=[], error=invalid_argument(str(exc)))
        if not good:
            return responses
        # One ONNX Runtime run for the whole dynamic batch; requests of different lengths are
        # right-padded with attention_mask 0, which leaves each row's logits unchanged.
        length = max(arrays["input_ids"].shape[1] for _, arrays in good)
        batch = {
            name: np.concatenate(
                [np.pad(arrays[name], ((0, 0), (0, length - arrays[name].shape[1]))) for _, arrays in good]
            )
            for name in self.inputs
        }
        try:
            results = self.session.run(list(self.outputs), batch)
        except Exception as exc:  # an ORT failure fails this batch's requests, not the server
            for i, _ in good:
                responses[i] = pb_utils.InferenceResponse(
                    output_tensors=[], error=pb_utils.TritonError(f"onnxruntime: {exc}")
                )
            return responses
        start = 0
        for i, arrays in good:
            n = arrays["input_ids"].shape[0]
            tensors = [
                pb_utils.Tensor(name, result[start : start + n].astype(dtype))
                for (name, dtype), result in zip(self.outputs.items(), results, strict=True)
            ]
            responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
            start += n
        return responses
