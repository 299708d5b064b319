"""The foundation's promises: pinned environments, idempotent setup, lazy CLIs."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pins(lock: Path) -> dict[str, str]:
    pins = {}
    for line in lock.read_text().splitlines():
        # Hashed locks (make lock): `name==version \` then indented `--hash=`/`# via` lines.
        if line.startswith(("#", " ", "-")) or not line.strip():
            continue
        name, _, version = line.removesuffix("\\").strip().partition("==")
        name = name.partition("[")[0]  # `pandas[parquet]==...`: the extras pip must see pinned
        assert version, f"{lock.name}: '{line}' is not pinned with =="
        pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def _requirement_name(spec: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[\[<>=!~; ]", spec, maxsplit=1)[0]).lower()


def test_every_declared_dependency_is_pinned_in_the_lock() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins(ROOT / "requirements" / "lock.txt")
    declared = {_requirement_name(s) for group in project["optional-dependencies"].values() for s in group}
    missing = sorted(declared - pins.keys())
    assert not missing, (
        f"declared in pyproject.toml but not pinned in requirements/lock.txt: {missing} (run make lock)"
    )
    assert pins["torch"].startswith("2.13.0"), pins["torch"]


def test_policy_pack_environment_is_separate_and_pins_protobuf_5() -> None:
    policy_pins = _pins(ROOT / "requirements" / "policies.lock.txt")
    project_pins = _pins(ROOT / "requirements" / "lock.txt")
    assert policy_pins["protobuf"].startswith("5."), "pulumi-policy needs protobuf 5"
    assert project_pins["protobuf"].split(".")[0] >= "6", "onnx and tritonclient need protobuf 6"
    # Both sides speak the same Analyzer protocol: the pulumi SDK must match.
    assert policy_pins["pulumi"] == project_pins["pulumi"]
    assert _pins(ROOT / "requirements" / "checkov.lock.txt")["packaging"].startswith("23.")


def test_second_make_setup_has_nothing_to_do() -> None:
    # `make -q` exits 0 only when every stamp is newer than its lock file.
    result = subprocess.run(["make", "-q", "setup"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, "make setup would rebuild an environment although no lock file changed"


HEAVY = (
    "torch",
    "transformers",
    "pulumi_aws",
    "pulumi_gcp",
    "pulumi_azure_native",
    "onnxruntime",
    "tritonclient",
    "evidently",
    "optuna",
    "pandas",
)


@pytest.mark.parametrize(
    "module",
    ["training", "serving", "promotion", "policies.analyze", "containers.build", "monitoring", "pipeline"],
)
def test_cli_help_does_not_import_heavy_sdks(module: str) -> None:
    probe = (
        "import runpy, sys\n"
        f"sys.argv = [{module!r}, '--help']\n"
        "try:\n"
        f"    runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
        "except SystemExit as e:\n"
        "    assert e.code in (0, None), e.code\n"
        f"print('HEAVY=' + ','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = result.stdout.strip().splitlines()[-1].removeprefix("HEAVY=")
    assert imported == "", f"`python -m {module} --help` imported {imported}"
