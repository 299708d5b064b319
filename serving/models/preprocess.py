"""Triton python-backend model `preprocess`: raw text -> input_ids, attention_mask.

Copied by `python -m serving build` into <repo>/preprocess/<version>/model.py; the version folder
also holds the bundle's tokenizer/ and metadata.json, so serving tokenizes exactly like training.

All requests of one dynamic batch are tokenized together and padded to the longest text among them,
rounded up to `pad_to_multiple_of` (not to max_length): short tweets cost short sequences, and the
classifier's dynamic batcher can merge requests again because they share one of a few shapes.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from sentiment_common import invalid_argument, parameters
from tokenizers import Tokenizer


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(version_dir, "metadata.json")) as fh:
            self.max_length = int(json.load(fh)["max_length"])
        params = parameters(config)
        # Far above max_length tokens, but bounded: a 100 MB "text" must not stall the tokenizer.
        self.max_text_bytes = int(params.get("max_text_bytes", "65536"))
        # Lengths are rounded up to a multiple of this: requests tokenized in different executions then
        # often share a shape, which the classifier's dynamic batcher needs to merge them.
        self.multiple = max(1, int(params.get("pad_to_multiple_of", "1")))
        self.input_name = config["input"][0]["name"]
        self.outputs = {o["name"]: pb_utils.triton_string_to_numpy(o["data_type"]) for o in config["output"]}
        tokenizer_dir = os.path.join(version_dir, "tokenizer")
        self.tokenizer = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
        self.tokenizer.no_padding()  # padding happens across requests below
        self.tokenizer.enable_truncation(max_length=self.max_length)
        self.pad_id = self._pad_id(tokenizer_dir)

    def _pad_id(self, tokenizer_dir):
        pad_token = "[PAD]"
        config_path = os.path.join(tokenizer_dir, "tokenizer_config.json")
        if os.path.exists(config_path):
            with open(config_path) as fh:
                pad_token = json.load(fh).get("pad_token") or pad_token
            if isinstance(pad_token, dict):  # older files store an AddedToken dict
                pad_token = pad_token.get("content", "[PAD]")
        pad_id = self.tokenizer.token_to_id(pad_token)
        return 0 if pad_id is None else pad_id

    def _decode(self, raw, index):
        if not isinstance(raw, bytes):
            raise ValueError(f"TEXT[{index}] is not a byte string: send TEXT as BYTES (UTF-8 text)")
        if len(raw) > self.max_text_bytes:
            raise ValueError(
                f"TEXT[{index}] is {len(raw)} bytes; the limit is {self.max_text_bytes} "
                f"(only the first {self.max_length} tokens are used anyway): shorten the text"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"TEXT[{index}] is not valid UTF-8 ({exc.reason} at byte {exc.start}): encode text as UTF-8"
            ) from None
        if not text.strip():
            raise ValueError(f"TEXT[{index}] is empty: send at least one non-whitespace character")
        return text

    def execute(self, requests):
        responses = [None] * len(requests)
        texts: list[str] = []
        owners: list[tuple[int, int, int]] = []
        for i, request in enumerate(requests):
            raw = pb_utils.get_input_tensor_by_name(request, self.input_name).as_numpy().reshape(-1)
            try:
                decoded = [self._decode(x, j) for j, x in enumerate(raw)]
            except ValueError as exc:
                responses[i] = pb_utils.InferenceResponse(output_tensors=[], error=invalid_argument(str(exc)))
                continue
            owners.append((i, len(texts), len(decoded)))
            texts.extend(decoded)
        if texts:
            encodings = self.tokenizer.encode_batch(texts)
            longest = max(len(e.ids) for e in encodings)
            length = min(-(-longest // self.multiple) * self.multiple, max(longest, self.max_length))
            ids = np.full((len(encodings), length), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(encodings), length), dtype=np.int64)
            for row, enc in enumerate(encodings):
                ids[row, : len(enc.ids)] = enc.ids
                mask[row, : len(enc.ids)] = 1
            arrays = {"input_ids": ids, "attention_mask": mask}
            for i, start, n in owners:
                tensors = [
                    pb_utils.Tensor(name, arrays[name][start : start + n].astype(dtype))
                    for name, dtype in self.outputs.items()
                ]
                responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
        return responses
