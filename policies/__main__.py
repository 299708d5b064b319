"""Entry point of the CrossGuard pack: `pulumi preview --policy-pack policies`.

The Pulumi CLI runs this file with the pack's own virtualenv (policies/.venv) through
`python -m pulumi.policy <engine> policies`, which puts this folder first on sys.path. The rules live
in the repository's `policies` package, so the repository root must be importable instead.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.path.dirname(_here)
# Replace the pack folder with the repo root: `policies/checkov.py` must not shadow real packages.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, _root)

from policies.pack import serve  # noqa: E402

serve()
