"""Every import of the code the training image runs is installed in the image.

The training image runs every step of the retraining pipeline and the monitoring CronJobs, not just
training: the packages its Dockerfile copies to /opt/app. Their imports are found statically (ast, imports
inside functions included, since the heavy ones are lazy on purpose), mapped to distributions by
importlib.metadata, and each must be in the image's pinned closure (containers/training/requirements.txt,
kept current by test_image_requirements.py). A package only a dev tool brings into the lock (jsonschema via
check-jsonschema, once) passes every other test and fails in the cluster; this is the test that catches it.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from packaging.utils import canonicalize_name

from containers import wheelhouse
from tests.pipeline.test_pipeline_argo import packages_in

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "training"

# Imports allowed to be absent from the image's requirements. Each says why it never runs in the image;
# a `files` set limits the entry to the modules that may import it (None: anywhere).
ALLOWED: dict[str, tuple[frozenset[str] | None, str]] = {
    "torch": (
        None,
        "NVIDIA's PyTorch base image provides torch (its CUDA build); containers/requirements.py leaves it "
        "out on purpose, a generic wheel would replace it",
    ),
    "ruamel": (
        frozenset({"promotion/stackconfig.py"}),
        "only `python -m promotion promote --stack-config`, which the GitHub workflows run on their runner "
        "(main.yml, promote.yml); the pipeline's promote step (pipeline/steps.py) never passes it, and "
        "the import is inside the function",
    ),
    "localservers": (
        frozenset({"monitoring/localstack.py"}),
        "the alert path on one machine (`make demo`, the tests): it starts Prometheus and Alertmanager binaries, "
        "which the image has not; no pipeline step and no CronJob imports it",
    ),
    "serving": (
        frozenset({"monitoring/evaluate.py"}),
        "`python -m monitoring evaluate` calls the live endpoint from an operator's or CI's virtualenv; "
        "no pipeline step and no CronJob of infra/k8s (drift, budget) runs it in the image",
    ),
}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(node: ast.AST) -> Iterator[tuple[str, int]]:
    """(absolute module name, line) of every import under ``node`` that can run: `if TYPE_CHECKING:` bodies
    never do."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child):
            for other in child.orelse:
                yield from imports(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(child, ast.Import):
            yield from ((alias.name, child.lineno) for alias in child.names)
        elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
            yield child.module, child.lineno
        yield from imports(child)


@functools.cache
def _distributions() -> Mapping[str, list[str]]:
    return md.packages_distributions()


def providers(module: str) -> set[str]:
    """Canonical names of the distributions that install ``module``.

    A namespace package (google, azure) is shared by many distributions: the one shipping the imported
    subpackage is the one needed, so `google.auth` asks for google-auth, not for protobuf."""
    top, _, rest = module.partition(".")
    dists = _distributions().get(top, [])
    if len(dists) > 1 and rest:
        sub = rest.split(".")[0]
        shipping = [
            d
            for d in dists
            if any(f.parts[:2] in ((top, sub), (top, f"{sub}.py")) for f in md.files(d) or [])
        ]
        dists = shipping or dists
    return {canonicalize_name(d) for d in dists}


def first_party() -> set[str]:
    return {p.parent.name for p in ROOT.glob("*/__init__.py")}


def missing_imports() -> list[str]:
    """`path:line: module (why)` for each import the image cannot satisfy."""
    copied = packages_in(ROOT / "containers" / IMAGE / "Dockerfile")
    installed = set(wheelhouse.pins(IMAGE))
    ours = first_party()
    problems = []
    for package in sorted(copied):
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for module, line in imports(ast.parse(path.read_text(encoding="utf-8"), filename=where)):
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in copied:
                    continue
                files, _why = ALLOWED.get(top, (frozenset(), ""))
                if files is None or where in files:
                    continue
                if top in ours:
                    problems.append(
                        f"{where}:{line}: {module} (a package of this repository the image does not copy)"
                    )
                    continue
                dists = providers(module)
                if not dists:
                    problems.append(f"{where}:{line}: {module} (no installed distribution provides it)")
                elif not dists & installed:
                    problems.append(
                        f"{where}:{line}: {module} (from {', '.join(sorted(dists))}, not in the image)"
                    )
    return problems


def test_every_import_of_the_code_the_training_image_runs_is_installed_in_it() -> None:
    assert {"training", "monitoring", "pipeline", "promotion"} <= packages_in(
        ROOT / "containers" / IMAGE / "Dockerfile"
    )
    problems = missing_imports()
    assert not problems, (
        f"containers/{IMAGE}/requirements.txt lacks what this code imports; add the distribution to the image "
        "(to the pyproject extra the image is built from, then `python -m containers.requirements`), "
        "or, if it never runs in the image, to ALLOWED here with the reason:\n" + "\n".join(problems)
    )


def test_the_allowlist_has_no_stale_entries() -> None:
    """An entry nothing needs any more would silently allow the next real miss."""
    copied = packages_in(ROOT / "containers" / IMAGE / "Dockerfile")
    used: dict[str, set[str]] = {}
    for package in copied:
        for path in (ROOT / package).rglob("*.py"):
            where = path.relative_to(ROOT).as_posix()
            for module, _ in imports(ast.parse(path.read_text(encoding="utf-8"))):
                used.setdefault(module.split(".")[0], set()).add(where)
    installed = set(wheelhouse.pins(IMAGE))
    for name, (files, why) in ALLOWED.items():
        assert why, name
        assert name in used, f"ALLOWED[{name!r}]: no module of the image imports it any more"
        if files is not None:
            assert files <= used[name], f"ALLOWED[{name!r}]: {sorted(files - used[name])} no longer import it"
        assert not providers(name) & installed, f"ALLOWED[{name!r}]: the image installs it now"


def test_the_scan_sees_imports_inside_functions_and_skips_type_checking_blocks() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import numpy\nelse:\n    import json\n"
        "def f():\n    import jsonschema\n    from google.auth import default\n"
    )
    assert [m for m, _ in imports(tree)] == ["typing", "json", "jsonschema", "google.auth"]
    assert providers("google.auth") == {"google-auth"}
    assert providers("yaml") == {"pyyaml"}
