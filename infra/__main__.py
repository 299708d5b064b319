"""Pulumi entry point (`pulumi up -s <stack>` runs this): read the config once, build, export."""

import sys
from pathlib import Path

# `main: infra/` runs this file as a script; the package imports need the repository root on the path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra import config, program  # noqa: E402

program.build(config.load())
