"""Run the DAG locally, step by step, as subprocesses (the demo path); leave a pipeline-run record.

The rule for each step is Argo's: it runs when every step it depends on succeeded and its ``when`` flag (if
any) is "true"; otherwise it is skipped, and the runner prints why. A failed step stops its dependents.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline import dag

RECORDS = "pipeline-runs"
"""<store>/<model>/pipeline-runs/<run_id>.json, beside the promotion records (<store>/<model>/records/)."""


def argv(step: dag.Step, params: dag.Params, flag_file: str) -> list[str]:
    values = {**dataclasses.asdict(params), "flag_file": flag_file}
    return [part.format(**values) for part in step.command]


def _flag_file(work: Path, name: str) -> Path:
    return work / "decisions" / f"{name}.flag"


def _decision(work: Path, name: str) -> dict[str, Any]:
    path = work / "decisions" / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def problems(params: dag.Params) -> list[str]:
    """What is wrong with the run's parameters, checked before any step runs (and by --dry-run).

    Each step reads its own parameters, but the last ones (`images`, `promote`) only after training: an
    unknown `--env` or `--local yes` used to fail there, exit 2, once the training and the export had run."""
    from promotion.config import load_config
    from promotion.errors import ConfigError

    found = []
    if params.mode not in ("train", "tune"):
        found.append(f"--mode must be train or tune, got {params.mode!r}")
    for name in ("local", "force"):
        if getattr(params, name) not in ("true", "false"):
            found.append(f"--{name} must be true or false, got {getattr(params, name)!r}")
    try:
        age = float(params.max_model_age_days)
    except ValueError:
        age = -1.0
    if not age >= 0 or age == float("inf"):
        found.append(f"--max-model-age-days must be a number of days >= 0, got {params.max_model_age_days!r}")
    if params.mode == "tune":
        for name in ("trials", "trial_timeout"):
            value = getattr(params, name)
            if not (value.isdigit() and int(value) > 0):
                found.append(f"--{name.replace('_', '-')} must be a whole number > 0, got {value!r}")
    try:  # the `promote` step's own gate config (promotion/gates.toml) names the environments
        load_config(None).environment(params.env)
    except ConfigError as exc:
        found.append(f"--env {params.env}: {exc}")
    if params.local == "false":
        from pipeline.images import parse

        for name in ("training_image", "serving_image"):
            try:
                parse(getattr(params, name))
            except ValueError as exc:
                found.append(f"--{name.replace('_', '-')} (needed with --local false): {exc}")
    return found


def plan(params: dag.Params) -> list[dict[str, Any]]:
    """--dry-run: the steps, their commands and conditions, nothing evaluated."""
    work = Path(params.work)
    return [
        {
            "step": s.name,
            "command": argv(s, params, str(_flag_file(work, s.name))),
            "depends": list(s.depends),
            "when": s.when,
            "condition": s.condition,
        }
        for s in dag.STEPS
    ]


def run(
    params: dag.Params,
    *,
    commands: Mapping[str, Sequence[str]] | None = None,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run every step whose conditions hold; returns the pipeline-run record (also written to the store).

    ``commands`` replaces a step's argv (tests fake only the genuinely external image build this way).
    """
    dag.check()
    bad = problems(params)
    if bad:
        raise ValueError("; ".join(bad))
    commands = commands or {}
    started = dt.datetime.now(dt.UTC)
    run_id = started.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    work = Path(params.work)
    (work / "decisions").mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    status: dict[str, str] = {}
    steps: list[dict[str, Any]] = []
    conditions: list[dict[str, Any]] = []
    interrupted = False
    for step in dag.STEPS:
        blocked = [d for d in step.depends if status[d] != "succeeded"]
        entry: dict[str, Any] = {"step": step.name}
        if interrupted:
            status[step.name] = "skipped"
            entry.update(status="skipped", why="the run was interrupted")
        elif blocked:
            status[step.name] = "skipped"
            entry.update(status="skipped", why=", ".join(f"{d} {status[d]}" for d in blocked))
        elif step.when and _flag_file(work, step.when).read_text(encoding="utf-8").strip() != "true":
            status[step.name] = "skipped"
            entry.update(status="skipped", why=f"condition of {step.when} is false")
        else:
            cmd = list(commands.get(step.name) or argv(step, params, str(_flag_file(work, step.name))))
            echo(f"RUN  {step.name}: {shlex.join(cmd)}")  # copyable: empty values show as ''
            t0 = dt.datetime.now(dt.UTC)
            # Ctrl-C, or SIGTERM through the CLI: the step is stopped and the record still says where.
            try:
                rc = _execute(python_argv(cmd), work / "logs" / f"{step.name}.log", echo)
            except KeyboardInterrupt:
                interrupted, rc = True, 130
            seconds = (dt.datetime.now(dt.UTC) - t0).total_seconds()
            status[step.name] = "succeeded" if rc == 0 else "failed"
            entry.update(status=status[step.name], exit_code=rc, seconds=round(seconds, 1), command=cmd)
            if interrupted:
                entry["why"] = "interrupted"
            if step.condition and rc == 0:
                value = _flag_file(work, step.name).read_text(encoding="utf-8").strip() == "true"
                reasons = _decision(work, step.name)
                conditions.append({"step": step.name, "condition": step.condition, "value": value, **reasons})
                echo(f"     condition {step.name} = {str(value).lower()}: {step.condition}")
        if entry["status"] == "skipped":
            echo(f"SKIP {step.name}: {entry['why']}")
        steps.append(entry)
    record = {
        "run_id": run_id,
        "started": started.isoformat().replace("+00:00", "Z"),
        "finished": dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"),
        "inputs": dataclasses.asdict(params),
        "conditions": conditions,
        "steps": steps,
        "outcome": outcome(status, work),
    }
    record["record_uri"] = write_record(record, params)
    echo(f"outcome: {record['outcome']} (record {record['record_uri']})")
    if interrupted:
        raise KeyboardInterrupt(record["record_uri"])
    return record


def outcome(status: Mapping[str, str], work: Path) -> str:
    failed = [name for name, s in status.items() if s == "failed"]
    if failed:
        return f"failed at {failed[0]}"
    if status.get("promote") == "succeeded":
        promoted = _decision(work, "promote").get("promoted")
        return "promoted" if promoted else "promotion rejected by its gates (see the promotion record)"
    if status.get("train") == "skipped":
        return "no retraining needed"
    if status.get("export") == "skipped":
        return "candidate lost: not promoted"
    if status.get("images") == "succeeded" and status.get("promote") == "skipped":
        return "no CI-built serving image for this candidate yet: not promoted"
    return "incomplete"


def _execute(cmd: Sequence[str], log: Path, echo: Callable[[str], None]) -> int:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "w", encoding="utf-8") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                f.write(line)
                if not line.startswith(("train:", "Writing model shards")):  # progress bars stay in the log
                    echo("     | " + line.rstrip())
        except KeyboardInterrupt:
            proc.terminate()  # a SIGTERM to the runner alone never reached the step
            proc.wait()
            raise
        return proc.wait()


def write_record(record: Mapping[str, Any], params: dag.Params) -> str:
    """Stored with its own `record_uri` (the README's shape), beside the promotion records and in WORK."""
    from promotion.evidence import join, write_bytes

    uri = join(params.store, params.model, RECORDS, f"{record['run_id']}.json")
    data = (json.dumps({**record, "record_uri": uri}, indent=2) + "\n").encode()
    write_bytes(uri, data)
    (Path(params.work) / "pipeline-run.json").write_bytes(data)
    return uri


def python_argv(cmd: Sequence[str]) -> list[str]:
    """`python -m ...` with this interpreter (a virtualenv's python need not be first on PATH)."""
    return [sys.executable, *cmd[1:]] if cmd and cmd[0] == "python" else list(cmd)
