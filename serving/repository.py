"""Build the versioned Triton model repository from an export bundle.

    python -m serving build runs/demo/export models/ --backend python      # local tritonserver (fused)
    python -m serving build runs/demo/export models/ --backend onnxruntime # NVIDIA image (production, bls)
    python -m serving pin models/ 3                                        # rollback: serve version 3 only

Layout (every build adds version N of both models, N = latest + 1 unless --version is given):

    <repo>/repository.json           build options, versions and their bundle metadata, pin
    <repo>/sentiment/config.pbtxt    python backend, the model clients call: TEXT -> LABEL, PROBABILITIES
    <repo>/sentiment/N/              model.py, tokenizer/, metadata.json, labels.json, steps.json, monitoring/
    <repo>/classifier/config.pbtxt   onnxruntime_onnx or python; N/model.onnx (+ .data), N/model.py

`sentiment` version N runs the graph of its own build: topology bls (production) calls `classifier` version N
(N/steps.json), fused (local default) its own copy (N/model.onnx), so an older version (or a pin) rolls back
model and tokenizer together. Configs (model level) are regenerated from repository.json on every build/pin;
the version policy keeps the previous version loaded until a pin narrows it to one version.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from serving import manifest as mf
from serving.bundle import Bundle, load_bundle
from serving.config import (
    DynamicBatching,
    InstanceGroup,
    ModelConfig,
    Tensor,
    VersionPolicy,
    Warmup,
    WarmupInput,
)
from serving.engine_config import OnnxRuntimeOptimization, TensorRTProfile
from serving.errors import ConfigError
from serving.options import Backend, BuildOptions, stored_options  # noqa: F401 (Backend: the name importers use)

ENDPOINT = "sentiment"
ENSEMBLE = ENDPOINT  # the name clients call (it was an ensemble; kept for importers)
CLASSIFIER = "classifier"
MODELS = (CLASSIFIER, ENDPOINT)  # load order: the endpoint's BLS calls need the classifier
STEPS_FILE = "steps.json"
MODEL_SOURCES = Path(__file__).resolve().parent / "models"
MONITORING_SOURCES = Path(__file__).resolve().parent.parent / "monitoring"
MONITORING_MODULES = ("__init__.py", "environment.py", "records.py")
# Keep the version before the newest loaded: requests can still pin it while a rollout is judged.
KEEP_VERSIONS = 2
# A client that did not send its own `timeout` is gone after this: 60 s is the longest wait of any caller here
# (loadtest 30 s) and the usual proxy read timeout (nginx ingress 60 s). Clients that send theirs
# (serving.client does) have their request dropped from the queue once they stopped waiting for it.
ENDPOINT_QUEUE_TIMEOUT_US = 60_000_000


def tensorrt_profile(options: BuildOptions, max_length: int) -> TensorRTProfile:
    """The shapes the sentiment model sends: batch 1..max_batch_size, length 1..max_length (bucketed)."""
    multiple = options.pad_to_multiple_of or 16
    opt_length = min(max_length, 2 * multiple)  # short texts dominate (tweets: ~20-30 tokens)
    return TensorRTProfile(
        inputs=("input_ids", "attention_mask"),
        min_shape=(1, 1),
        opt_shape=(min(options.max_batch_size, 8), opt_length),
        max_shape=(options.max_batch_size, max_length),
    )


def model_configs(
    options: BuildOptions, num_labels: int, pinned: int | None = None, *, max_length: int = 128
) -> dict[str, ModelConfig]:
    """Both configs; a pure function of the options, so tests can check each one without a server."""
    policy = VersionPolicy(latest=None, specific=(pinned,)) if pinned else VersionPolicy(latest=KEEP_VERSIONS)
    mbs = options.max_batch_size
    tokens = (
        Tensor(name="input_ids", data_type="TYPE_INT64", dims=(-1,)),
        Tensor(name="attention_mask", data_type="TYPE_INT64", dims=(-1,)),
    )
    text = Tensor(name="TEXT", data_type="TYPE_STRING", dims=(1,))
    logits = Tensor(name="logits", data_type="TYPE_FP32", dims=(num_labels,))
    label = Tensor(name="LABEL", data_type="TYPE_STRING", dims=(1,))
    probabilities = Tensor(name="PROBABILITIES", data_type="TYPE_FP32", dims=(num_labels,))

    # One optimisation block for both engines: the onnxruntime backend applies it, the python stand-in
    # reads it from its config (graph level 0 = ORT_ENABLE_ALL, as the export's parity check ran).
    optimization = OnnxRuntimeOptimization(
        graph_level=0,
        tensorrt=tensorrt_profile(options, max_length) if options.gpu else None,
        trt_cache_path=options.trt_cache_path,
    )
    engine: dict[str, Any] = (
        {"platform": "onnxruntime_onnx"} if options.backend == "onnxruntime" else {"backend": "python"}
    )
    classifier = ModelConfig(
        name=CLASSIFIER,
        **engine,
        onnxruntime=optimization,
        max_batch_size=mbs,
        inputs=tokens,
        outputs=(logits,),
        dynamic_batching=DynamicBatching(max_queue_delay_microseconds=options.classifier_queue_delay_us),
        instance_groups=(
            InstanceGroup(count=options.instances, kind="KIND_GPU" if options.gpu else "KIND_CPU"),
        ),
        version_policy=policy,
        # The ORT backend's documented parameter names, read the same way by our python stand-in.
        parameters={
            "intra_op_thread_count": str(0 if options.gpu else options.threads()),
            "inter_op_thread_count": "1",
            "allow_spinning": "1" if options.ort_spinning else "0",
        },
        # Zero ids at length 16: the first user request then does not pay ORT's lazy initialisation.
        warmup=(
            Warmup(
                name="zeros-16",
                batch_size=1,
                inputs={t.name: WarmupInput(data_type="TYPE_INT64", dims=(16,)) for t in tokens},
            ),
        ),
    )
    fused = options.topology == "fused"
    endpoint = ModelConfig(
        name=ENDPOINT,
        backend="python",
        onnxruntime=optimization if fused else None,
        max_batch_size=mbs,
        inputs=(text,),
        outputs=(label, probabilities),
        dynamic_batching=DynamicBatching(
            max_queue_delay_microseconds=options.queue_delay_us,
            queue_timeout_microseconds=ENDPOINT_QUEUE_TIMEOUT_US,
        ),
        instance_groups=(InstanceGroup(count=int(options.endpoint_instances or 1), kind="KIND_CPU"),),
        version_policy=policy,
        parameters={
            "max_text_bytes": str(options.max_text_bytes),
            "pad_to_multiple_of": str(options.pad_to_multiple_of or (16 if options.gpu else 1)),
            **(
                {"length_split_overhead_tokens": f"{options.length_split_overhead:g}"}
                if (options.length_split_overhead or 0) >= 0
                else {}
            ),
            **(
                {
                    "topology": "fused",
                    "intra_op_thread_count": str(options.endpoint_threads()),
                    "inter_op_thread_count": "1",
                    "allow_spinning": "1" if options.ort_spinning else "0",
                }
                if fused
                else {}
            ),
        },
    )
    return {c.name: c for c in (endpoint, classifier)}


def _write_configs(repo: Path, manifest: dict[str, Any]) -> None:
    options = stored_options(manifest.get("options"), str(repo / mf.MANIFEST))
    # Written back whole: an old manifest's absent options (ABSENT_MEANS) stay what they meant for a serving
    # without ABSENT_MEANS too (an older image during a rollout), which would fill them with its own defaults.
    manifest["options"] = asdict(options)
    latest = str(max(int(v) for v in manifest["versions"]))
    entry = manifest["versions"][latest]
    configs = model_configs(
        options, entry["num_labels"], manifest["pinned"], max_length=int(entry.get("max_length") or 128)
    )
    for name, config in configs.items():
        (repo / name).mkdir(parents=True, exist_ok=True)
        mf.atomic_write(repo / name / "config.pbtxt", config.render())  # a truncated one fails Triton's load
    mf.write_manifest(repo, manifest)  # the commit: a version is built once this lists it


def build(
    bundle_path: str | Path,
    repo: str | Path,
    *,
    version: int | None = None,
    options: BuildOptions | None = None,
) -> int:
    """Add the bundle to `repo` as a new version of every model; return the version number."""
    bundle: Bundle = load_bundle(bundle_path)
    repo = Path(repo)
    with mf.locked(repo):  # serving/manifest.py: two builds took the same version number
        return _build(bundle, repo, version, options or BuildOptions())


def _recover(repo: Path) -> dict[str, Any]:
    """The manifest, after undoing what a build stopped before its commit left (serving/manifest.py)."""
    manifest = mf.read_manifest(repo)
    if mf.undo_interrupted_build(repo, manifest) and manifest["versions"]:
        _write_configs(repo, manifest)  # the stopped build may have rendered configs for its own options
    return manifest


def recover(repo: str | Path) -> None:
    """For `serve`/`check --repo`: Triton would load any version folder the manifest does not list."""
    repo = Path(repo)
    manifest = None if mf.interrupted(repo) else mf.read_manifest(repo)
    if manifest is None or mf.unlisted(repo, manifest, MODELS):
        with mf.locked(repo):  # a build running now lists its folders only at its commit: wait for it
            manifest = _recover(repo)
    if manifest["pinned"] is None:
        mf.refuse_unlisted(repo, manifest, MODELS)


def _build(bundle: Bundle, repo: Path, version: int | None, options: BuildOptions) -> int:
    manifest = _recover(repo)
    existing = [int(v) for v in manifest["versions"]]
    latest = max(existing, default=0)
    if version is None:
        version = latest + 1
    elif version <= latest:
        raise ConfigError(
            f"version {version}: versions only increase and {repo} already has {latest}; "
            f"pass --version {latest + 1} (or omit it). To serve an older version, use `serving pin`."
        )
    if version < 1:
        raise ConfigError("version must be >= 1")
    # Not named by a pending build (those went in _recover): Triton would serve it beside (or over) this one.
    mf.refuse_unlisted(repo, manifest, MODELS)
    if manifest["versions"]:  # the versions kept loaded were built to these: a layout this one cannot serve
        stored_options(manifest.get("options"), str(repo / mf.MANIFEST))
    model_file = bundle.model_file(options.precision)
    bundle.check_graph(model_file)

    staged = {name: repo / name / f".{version}.tmp" for name in MODELS}
    mf.begin_build(repo, version, [f"{name}/{version}" for name in MODELS])
    try:
        for path in staged.values():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
        endpoint = staged[ENDPOINT]
        shutil.copy2(MODEL_SOURCES / "sentiment.py", endpoint / "model.py")
        shutil.copytree(bundle.path / "tokenizer", endpoint / "tokenizer")
        shutil.copy2(bundle.path / "metadata.json", endpoint / "metadata.json")
        (endpoint / "labels.json").write_text(json.dumps(list(bundle.labels)) + "\n")
        # The whole-rollback pin: this sentiment version calls the classifier of the same build.
        steps = {CLASSIFIER: {"model": CLASSIFIER, "version": version}}
        (endpoint / STEPS_FILE).write_text(json.dumps(steps, indent=2) + "\n")
        # Inference records (monitoring/records.py): the import-light monitoring modules beside model.py.
        (endpoint / "monitoring").mkdir()
        for module in MONITORING_MODULES:
            shutil.copy2(MONITORING_SOURCES / module, endpoint / "monitoring" / module)
        cls = staged[CLASSIFIER]
        data = model_file.parent / (model_file.name + ".data")
        for folder in (cls, endpoint) if options.topology == "fused" else (cls,):
            shutil.copy2(model_file, folder / "model.onnx")
            if data.is_file():  # the graph names its external data file; keep that name
                shutil.copy2(data, folder / data.name)
        # Both backends' files in every version: switching --backend later re-renders only config.pbtxt.
        shutil.copy2(MODEL_SOURCES / "classifier.py", cls / "model.py")
        for path in staged.values():
            for helper in ("sentiment_common.py", "batching.py"):
                shutil.copy2(MODEL_SOURCES / helper, path / helper)
        for name, path in staged.items():
            path.rename(repo / name / str(version))
        if options.topology == "fused":
            _backfill_fused_graphs(repo, existing)
        meta = bundle.metadata
        manifest["versions"][str(version)] = {
            "bundle": str(bundle.path.resolve()),
            "model_name": meta.get("model_name"),
            "model_version": meta.get("model_version"),
            "dataset_manifest_sha256": meta.get("dataset_manifest_sha256"),
            "git_revision": meta.get("git_revision"),
            "metrics": meta.get("metrics", {}),
            "precision": options.precision,
            "num_labels": len(bundle.labels),
            "max_length": meta.get("max_length"),
            "built": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        manifest["options"] = asdict(options)
        manifest["pinned"] = None  # a new build is a rollout: it releases any earlier pin
        _write_configs(repo, manifest)
    except BaseException:  # no half version (classifier without endpoint) stays, nor its configs
        with contextlib.suppress(Exception):
            _recover(repo)
        raise
    mf.end_build(repo)
    return version


def _backfill_fused_graphs(repo: Path, older: list[int]) -> None:
    """fused makes every loaded sentiment version run its own graph (the config is per model, not per
    version), but versions built as bls have no sentiment/V/model.onnx and would fail to load. Their
    classifier/V holds the same build's graph: copy it beside them, so older versions keep loading and a
    rollback to them stays whole."""
    for v in older:
        target, source = repo / ENDPOINT / str(v), repo / CLASSIFIER / str(v)
        if not target.is_dir() or (target / "model.onnx").exists() or not source.is_dir():
            continue
        for path in source.iterdir():
            if path.name == "model.onnx" or path.name.endswith(".onnx.data"):
                # Through a temporary name: a truncated graph left by a kill would be skipped next time.
                shutil.copy2(path, target / f".{path.name}.tmp")
                (target / f".{path.name}.tmp").replace(target / path.name)


def pin(repo: str | Path, version: int | None) -> None:
    """Serve only `version` (a rollback), or None to return to the newest versions."""
    repo = Path(repo)
    if not repo.is_dir():
        raise ConfigError(f"{repo} has no versions: run `python -m serving build BUNDLE {repo}` first")
    with mf.locked(repo):
        _pin(repo, version)


def _pin(repo: Path, version: int | None) -> None:
    manifest = _recover(repo)
    if not manifest["versions"]:
        raise ConfigError(f"{repo} has no versions: run `python -m serving build BUNDLE {repo}` first")
    if version is not None and str(version) not in manifest["versions"]:
        raise ConfigError(
            f"version {version} is not in {repo}: available {sorted(map(int, manifest['versions']))}"
        )
    if version is None:  # `latest` would put them in service; a pin to a listed version leaves them unloaded
        mf.refuse_unlisted(repo, manifest, MODELS)
    manifest["pinned"] = version
    _write_configs(repo, manifest)
