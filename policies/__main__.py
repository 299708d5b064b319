"""Entry point of the CrossGuard pack: `pulumi preview --policy-pack policies`.

The Pulumi CLI runs this file with the pack's own virtualenv (policies/.venv) through
`python -m pulumi.policy <engine> <pack dir>`, which puts the pack folder first on sys.path. The pack
is self-contained: this folder is loaded as the package `policies` from itself, whatever the folder is
called, so a published copy (`pulumi policy publish`) needs nothing from the repository around it.
"""

import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
# Modules of this folder are reached as `policies.<name>`, never as top-level names: `checkov.py` here
# must not shadow the real package, so the folder itself leaves sys.path.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.util.spec_from_file_location(
    "policies", os.path.join(_here, "__init__.py"), submodule_search_locations=[_here]
)
assert _spec is not None and _spec.loader is not None
_package = importlib.util.module_from_spec(_spec)
sys.modules["policies"] = _package
_spec.loader.exec_module(_package)

from policies.pack import serve  # noqa: E402

serve()
