"""The `promote` step: `python -m promotion promote` in this process, and its decision (WORK/decisions/promote.json).

The decision is the promotion record's, not the exit code's: a promotion that stood but whose drift reference could
not be written exits 2, and `promoted: false` beside a run "failed at promote" had an operator promote again.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from pipeline.steps import _file_store, _in_pod, _warn_mlflow_in_pod, _write, publish_candidate

RECORD = "promotion-record.json"
"""The promotion's record (`--out`), beside the step's decision."""


def promote(args: argparse.Namespace) -> int:
    # promotion's CLI entry, not its bare `main`: a SIGTERM to this step (the runner stopping it, a deleted pod) then
    # stops the deploy and removes the environment's lock, as for `python -m promotion`. Python's default used to
    # end this process on the spot, leaving the lock for every later promotion to be refused on.
    from promotion.__main__ import cli as promotion_cli
    from promotion.drift_reference import rerun_command
    from promotion.registry import default_registry_uri
    from training.retry import object_store

    registry = default_registry_uri()
    if _in_pod() and _file_store(registry):
        _warn_mlflow_in_pod(f"registry (model version and the {args.env} alias)", registry)
    candidate = args.candidate
    if object_store(args.store) and (Path(candidate) / "export" / "metadata.json").is_file():
        # The registry version's source and the record's lineage must outlive WORK (on the cluster a volume deleted
        # with the workflow), and a tracking server refuses a version whose files are local: promote the store's
        # copy (what `images` published; content-addressed, so publishing again writes the same place).
        candidate = publish_candidate(Path(candidate), args.store, args.model)
        print(f"promoting the candidate's copy in the store: {candidate}")
    argv = ["promote", "--env", args.env, "--candidate", candidate, "--store", args.store]
    argv += ["--model-name", args.model]
    if args.loadtest:
        argv += ["--loadtest", args.loadtest]
    if args.local == "true":
        argv += ["--local-run", "--no-images"]
    else:  # what the images step resolved and verified by digest
        argv += ["--build-record", str(Path(args.candidate) / "build-record.json")]
    # drift-check's reference becomes the promoted model's: the next check refuses (exit 2) the new model's window
    # against the old one's records. A manifest.json names its own run: nothing to replace (pipeline/README.md).
    reference = args.drift_reference if not args.drift_reference.endswith("manifest.json") else ""
    if reference:
        argv += ["--drift-reference", reference]
    with tempfile.TemporaryDirectory(prefix="promote-step-") as tmp:
        record_file = (args.out.parent if args.out else Path(tmp)) / RECORD
        record_file.unlink(missing_ok=True)  # a rerun in the same WORK: never the last run's decision
        rc = promotion_cli([*argv, "--out", str(record_file)])
        decision = _decision(record_file)
    doc: dict[str, Any] = {"promoted": decision == "promote", "exit_code": rc, "decision": decision}
    if reference:
        doc["drift_reference_written"] = decision == "promote" and rc == 0
    if doc["promoted"] and rc != 0 and reference:
        # Promoted, and promotion said what was left (the reference) with its command: the step fails so that the
        # run says so, and the decision keeps the command for whoever reads it.
        doc["drift_reference_command"] = rerun_command(args.env, reference, args.store, args.model)
        print(
            f"promote: {args.env} was promoted (do not promote again), but its drift reference was not written: "
            f"{doc['drift_reference_command']}",
            file=sys.stderr,
        )
    # 1 = a gate rejected the candidate: a decision (recorded by promotion), not a broken step.
    _write(args.out, doc)
    return 0 if rc in (0, 1) else rc


def _decision(record_file: Path) -> str | None:
    """The record's decision, or None when promotion stopped before it had one (bad input: exit 2)."""
    try:
        return str(json.loads(record_file.read_text(encoding="utf-8"))["decision"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
