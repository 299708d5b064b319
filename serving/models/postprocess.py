"""Triton python-backend model `postprocess`: logits -> LABEL (class name) and PROBABILITIES (softmax)."""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from sentiment_common import invalid_argument


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        with open(os.path.join(args["model_repository"], args["model_version"], "labels.json")) as fh:
            self.labels = np.array([label.encode("utf-8") for label in json.load(fh)], dtype=object)
        self.input_name = config["input"][0]["name"]

    def execute(self, requests):
        responses = []
        for request in requests:
            logits = pb_utils.get_input_tensor_by_name(request, self.input_name).as_numpy().astype(np.float64)
            if logits.ndim != 2 or logits.shape[1] != len(self.labels):
                error = invalid_argument(f"logits shape {logits.shape}, expected [batch, {len(self.labels)}]")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
                continue
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
            probabilities = (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)
            labels = self.labels[probabilities.argmax(axis=1)].reshape(-1, 1)
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("LABEL", labels),
                        pb_utils.Tensor("PROBABILITIES", probabilities),
                    ]
                )
            )
        return responses
