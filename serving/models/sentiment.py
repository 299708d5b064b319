"""Triton python-backend model `sentiment`, the endpoint clients call: TEXT -> LABEL, PROBABILITIES.

Copied by `python -m serving build` into <repo>/sentiment/<version>/model.py. The version folder holds
the bundle's tokenizer/, metadata.json, labels.json and steps.json, which names the classifier version
this sentiment version calls (the same build's). So requesting sentiment version N always runs
classifier version N: rolling back `sentiment` rolls back the model and its tokenizer with it.

One execution = one dynamic batch of requests: tokenized together, padded to the longest text among
them (rounded up to `pad_to_multiple_of`), one BLS call to the classifier (Triton's onnxruntime backend
in production, the python stand-in locally), softmax and labels here. Texts of any length batch
together at this model (its input is one string per text); the classifier then receives one
already-merged batch, instead of single requests it could only merge when their lengths match.

With the config parameter `topology: "fused"` (the default with the local python backend; production's
onnxruntime backend uses the BLS call above: serving/README.md) the version folder also holds the
classifier's model.onnx and this model runs it in-process (the same ONNX Runtime settings as production's
classifier, read from this config) instead of the BLS call: one python hop instead of two.
"""

import contextlib
import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils
from batching import length_groups
from sentiment_common import invalid_argument, ort_session, parameters
from tokenizers import Tokenizer


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(version_dir, "metadata.json")) as fh:
            self.max_length = int(json.load(fh)["max_length"])
        with open(os.path.join(version_dir, "labels.json")) as fh:
            self.labels = np.array([label.encode("utf-8") for label in json.load(fh)], dtype=object)
        with open(os.path.join(version_dir, "steps.json")) as fh:
            step = json.load(fh)["classifier"]
        self.classifier, self.classifier_version = step["model"], int(step["version"])
        params = parameters(config)
        # Far above max_length tokens, but bounded: a 100 MB "text" must not stall the tokenizer.
        self.max_text_bytes = int(params.get("max_text_bytes", "65536"))
        # Lengths round up to a multiple of this: a GPU engine then sees a few shapes, not every length.
        self.multiple = max(1, int(params.get("pad_to_multiple_of", "1")))
        # A call's fixed cost in token-equivalents: the batch runs as length-sorted sub-batches when they cost
        # less than padding every text to the longest (batching.py); unset: one padded batch (GPU: padding is
        # nearly free there).
        overhead = params.get("length_split_overhead_tokens", "")
        self.split_overhead = float(overhead) if overhead else None
        self.input_name = config["input"][0]["name"]
        tokenizer_dir = os.path.join(version_dir, "tokenizer")
        self.tokenizer = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
        self.tokenizer.no_padding()  # padding happens across the batch below
        self.tokenizer.enable_truncation(max_length=self.max_length)
        self.pad_id = self._pad_id(tokenizer_dir)
        self.records = _records(args, [label.decode("utf-8") for label in self.labels])
        self.errors = _Errors(args["model_name"], args["model_version"])
        self.session = None
        if params.get("topology", "bls") == "fused":
            graph = os.path.join(version_dir, "model.onnx")
            if not os.path.exists(graph):
                raise pb_utils.TritonModelException(
                    f"topology fused needs {graph}: rebuild the repository with `serving build`"
                )
            self.session = ort_session(config, graph)

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

    def _tokens(self, encodings):
        longest = max(len(e.ids) for e in encodings)
        length = min(-(-longest // self.multiple) * self.multiple, max(longest, self.max_length))
        ids = np.full((len(encodings), length), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), length), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        return ids, mask, [len(e.ids) for e in encodings]

    def _batch_logits(self, ids, mask, lengths):
        """The batch's logits (float64), run as the length-sorted sub-batches `length_groups` cuts."""
        groups = length_groups(lengths, self.split_overhead, self.multiple)
        if len(groups) == 1:
            return self._logits(ids, mask).astype(np.float64)
        out = None
        for rows, length in groups:
            width = min(length, ids.shape[1])
            part = self._logits(ids[rows, :width], mask[rows, :width])
            if out is None:
                out = np.empty((len(lengths), part.shape[1]), dtype=np.float64)
            out[rows] = part
        return out

    def _logits(self, ids, mask):
        """One BLS call to the pinned classifier version; raises pb_utils.TritonModelException on failure."""
        if self.session is not None:  # fused: this version's own graph, in this process
            return self.session.run(["logits"], {"input_ids": ids, "attention_mask": mask})[0]
        request = pb_utils.InferenceRequest(
            model_name=self.classifier,
            model_version=self.classifier_version,
            requested_output_names=["logits"],
            inputs=[pb_utils.Tensor("input_ids", ids), pb_utils.Tensor("attention_mask", mask)],
        )
        response = request.exec()
        if response.has_error():
            raise pb_utils.TritonModelException(
                f"{self.classifier} version {self.classifier_version}: {response.error().message()}"
            )
        return pb_utils.get_output_tensor_by_name(response, "logits").as_numpy()

    def execute(self, requests):
        received_ns = time.time_ns()  # the inference record's latency starts here
        responses = [None] * len(requests)
        texts: list[str] = []
        owners: list[tuple[int, int, int]] = []  # (request, first text, texts)
        raws: list[np.ndarray] = []
        decoded_requests = []
        for i, request in enumerate(requests):
            raw = pb_utils.get_input_tensor_by_name(request, self.input_name).as_numpy().reshape(-1)
            try:
                decoded = [self._decode(x, j) for j, x in enumerate(raw)]
            except ValueError as exc:
                responses[i] = pb_utils.InferenceResponse(output_tensors=[], error=invalid_argument(str(exc)))
                self.errors.count("invalid_input")
                continue
            decoded_requests.append((i, raw, len(texts), len(decoded)))
            texts.extend(decoded)
        # One tokenizer call for the whole batch (it runs the texts in parallel), then per request.
        every = self.tokenizer.encode_batch(texts) if texts else []
        encodings: list = []
        for i, raw, start, n in decoded_requests:
            mine = every[start : start + n]
            empty = next((j for j, e in enumerate(mine) if _no_content(e)), None)
            if empty is not None:
                # NUL, control, zero-width or format characters only: the tokenizer drops them all, and an
                # answer for [CLS] [SEP] alone would be the same for every such text, not about this one.
                message = (
                    f"TEXT[{empty}] has no characters the model reads (only control, zero-width or format "
                    "characters such as NUL, U+200B or U+FEFF): send at least one visible character"
                )
                responses[i] = pb_utils.InferenceResponse(output_tensors=[], error=invalid_argument(message))
                self.errors.count("invalid_input")
                continue
            owners.append((i, len(encodings), n))
            encodings.extend(mine)
            raws.append(raw)
        if not encodings:
            return responses
        ids, mask, lengths = self._tokens(encodings)
        try:
            logits = self._batch_logits(ids, mask, lengths)
        except Exception as exc:  # a classifier failure fails this batch's requests, not the server
            for i, _, _ in owners:
                responses[i] = pb_utils.InferenceResponse(
                    output_tensors=[], error=pb_utils.TritonError(str(exc))
                )
            self.errors.count("internal", len(owners))
            return responses
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities = (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)
        labels = self.labels[probabilities.argmax(axis=1)].reshape(-1, 1)
        for (i, start, n), raw in zip(owners, raws, strict=True):
            rows = slice(start, start + n)
            if self.records is not None:
                self.records.offer(ids[rows], mask[rows], probabilities[rows], received_ns, raw)
            responses[i] = pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor("LABEL", labels[rows]),
                    pb_utils.Tensor("PROBABILITIES", probabilities[rows]),
                ]
            )
        return responses

    def finalize(self):
        if self.records is not None:
            self.records.close()


def _no_content(encoding):
    """Only special tokens, even before truncation (the tokenizer's normalizer removed every character)."""
    return all(encoding.special_tokens_mask) and not encoding.overflowing


class _Errors:
    """ml_inference_errors_total{model, version, kind}: the error responses this model returned.

    Triton counts a python-backend response that carries an error as nv_inference_request_success
    (nv_inference_request_failure stays 0), so this counter is what ServingErrorRateHigh reads.
    kind="invalid_input": the client's text was refused; kind="internal": the model failed it.
    """

    KINDS = ("invalid_input", "internal")

    def __init__(self, model, version):
        # Keep the family referenced: Triton deletes a family's metrics when the family is collected.
        self.family = pb_utils.MetricFamily(
            name="ml_inference_errors_total",
            description="error responses returned, by kind (invalid_input or internal)",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        # Created up front, so every kind reads 0 (not absent) until its first error.
        self.metrics = {
            kind: self.family.Metric(labels={"model": model, "version": str(version), "kind": kind})
            for kind in self.KINDS
        }

    def count(self, kind, n=1):
        with contextlib.suppress(Exception):  # monitoring never fails a request
            self.metrics[kind].increment(n)


class _Records:
    """Sampled inference records (monitoring/records.py), off the request path; see monitoring/README.md."""

    def __init__(self, recorder):
        self.recorder = recorder
        kind = pb_utils.MetricFamily.COUNTER
        labels = {"model": recorder.model, "version": recorder.model_version}
        # Keep the families referenced: Triton deletes a family's metrics when the family is collected.
        self.families = {
            name: pb_utils.MetricFamily(name=f"ml_inference_records_{name}_total", description=doc, kind=kind)
            for name, doc in (
                ("written", "inference records written"),
                ("dropped", "inference records dropped"),
            )
        }
        self.metrics = {name: family.Metric(labels=labels) for name, family in self.families.items()}
        self.seen = {"written": 0, "dropped": 0}

    def offer(self, ids, mask, probabilities, received_ns, texts):
        received = np.full((ids.shape[0], 1), received_ns, dtype=np.int64)
        self.recorder.offer(
            ids=ids, mask=mask, probabilities=probabilities, received_ns=received, texts=texts
        )
        try:  # counters on Triton's /metrics; monitoring never fails a request
            for name, value in self.recorder.counters.items():
                if value > self.seen[name]:
                    self.metrics[name].increment(value - self.seen[name])
                    self.seen[name] = value
        except Exception:
            pass

    def close(self):
        self.recorder.close()


def _records(args, labels):
    """A recorder when MONITORING_SAMPLE_RATE/MONITORING_RECORDS_URL ask for one, else None."""
    from monitoring.records import Recorder, TokenizerFacts

    version_dir = os.path.join(args["model_repository"], args["model_version"])
    with open(os.path.join(version_dir, "metadata.json")) as fh:
        meta = json.load(fh)
    tokenizer_json = os.path.join(version_dir, "tokenizer", "tokenizer.json")
    facts = TokenizerFacts.from_files(tokenizer_json, int(meta["max_length"]))
    recorder = Recorder.from_environment(
        facts=facts,
        labels=labels,
        model=str(meta.get("model_name") or "sentiment"),
        model_version=str(meta.get("model_version") or args["model_version"]),
    )
    return _Records(recorder) if recorder.enabled else None
