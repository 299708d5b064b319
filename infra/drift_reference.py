"""Where a stack's drift CronJob reads the served model's reference, from the stack's `bucket_uris` output: the
`--drift-reference` that CI gives `python -m promotion promote|rollback` (promotion/README.md, "Drift reference").

    pulumi stack output bucket_uris --json --stack dev | python -m infra.drift_reference   # s3://<models>/reference/

Exit 0 with the location on stdout; 2 when stdin is not that output (the message says what was read).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from infra.k8s.monitoring import fsspec_url
from infra.shape import REFERENCE_PREFIX


def location(bucket_uris: Mapping[str, Any]) -> str:
    """The models bucket's `reference/` prefix as the drift CronJob is given it (infra/program.py)."""
    models = bucket_uris.get("models")
    if not isinstance(models, str) or not models:
        raise ValueError(f"no models bucket in {dict(bucket_uris)!r}")
    return fsspec_url(models, REFERENCE_PREFIX) + "/"


def parser() -> argparse.ArgumentParser:
    # No arguments: built so that `--help` answers and the commands that call it are checked like every CLI's.
    return argparse.ArgumentParser(
        prog="python -m infra.drift_reference",
        description="print the drift reference location from `pulumi stack output bucket_uris --json` on stdin",
    )


def main(argv: list[str] | None = None) -> int:
    parser().parse_args(argv)
    text = sys.stdin.read()
    try:
        uris = json.loads(text)
        if not isinstance(uris, dict):
            raise ValueError(f"expected a JSON object, got {text.strip()[:200]!r}")
        print(location(uris))
    except ValueError as exc:  # json.JSONDecodeError is one
        print(
            f"infra.drift_reference: {exc}. Pipe in the stack's output: "
            "`pulumi stack output bucket_uris --json --stack STACK | python -m infra.drift_reference`",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
