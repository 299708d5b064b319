"""Run the DAG locally, step by step, as subprocesses (the demo path); leave a pipeline-run record.

The rule for each step is Argo's: it runs when every step it depends on succeeded and its ``when`` flag (if
any) is "true"; otherwise it is skipped, and the runner prints why. A failed step stops its dependents.

One run owns its WORK: it holds WORK/.pipeline.lock while it runs (a second run there is refused, naming the
holder), and a WORK whose candidate a finished training left is refused too (see `work_problems`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import shlex
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline import dag, supervise

RECORDS = "pipeline-runs"
"""<store>/<model>/pipeline-runs/<run_id>.json, beside the promotion records (<store>/<model>/records/)."""
EXIT_INTERRUPTED = 130
"""An interrupted step's exit code in the record (128 + SIGINT, what a shell reports for Ctrl-C)."""


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def argv(step: dag.Step, params: dag.Params, flag_file: str) -> list[str]:
    values = {**dataclasses.asdict(params), "flag_file": flag_file}
    return [part.format(**values) for part in step.command]


def _flag_file(work: Path, name: str) -> Path:
    return work / "decisions" / f"{name}.flag"


def _decision(work: Path, name: str) -> dict[str, Any]:
    path = work / "decisions" / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def data_problems(params: dag.Params) -> list[tuple[str, str]]:
    """--data/--labels/--text-column/--label-column as training's own config checks them (two distinct class
    names, for one): refused here, not by the data check or after a retrain decision. Each problem is the
    parameter's name (a dag.Params field: callers name it as their own input, a flag or a stack key) and why."""
    from training import presets
    from training.config import apply_overrides
    from training.errors import ConfigError as TrainingConfigError

    fields = {"data": "data.source", **dag.DATA_FIELDS}
    try:
        apply_overrides(
            presets.get(params.preset), {setting: getattr(params, name) for name, setting in fields.items()}
        )
    except TrainingConfigError as exc:
        return [(next((n for n, setting in fields.items() if setting == exc.field), "data"), str(exc))]
    return []


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
    found += [f"{dag.flag(name)}: {why}" for name, why in data_problems(params)]
    if params.mode == "tune":
        for name in ("trials", "trial_timeout"):
            value = getattr(params, name)
            if not (value.isdigit() and int(value) > 0):
                found.append(f"{dag.flag(name)} must be a whole number > 0, got {value!r}")
    try:  # the `promote` step's own gate config (promotion/gates.toml) names the environments
        env = load_config(None).environment(params.env)
    except ConfigError as exc:
        found.append(f"--env {params.env}: {exc}")
    else:  # promotion refuses `--local-run` there, but only at the last step, after the training
        if params.local == "true" and not env.allow_local_run:
            found.append(
                f"--env {params.env} takes no local run (allow_local_run = false in promotion/gates.toml): pass "
                "--local false with --training-image and --serving-image pinned by digest, or promote to dev"
            )
    if params.local == "false":
        from pipeline.images import parse

        for name in ("training_image", "serving_image"):
            try:
                parse(getattr(params, name))
            except ValueError as exc:
                found.append(f"{dag.flag(name)} (needed with --local false): {exc}")
    return found + work_problems(Path(params.work))


def work_problems(work: Path) -> list[str]:
    """A WORK whose candidate finished training belongs to that run: a new run there did not train (the trainer
    found the finished checkpoint and only re-scored it) and re-exported into the folder that run's promotion
    record and registry version name as their source, so the promoted bundle changed under its record. A WORK
    whose record the store refused holds that record's only copy, which the next run there wrote over."""
    found = []
    record: Any = None
    with contextlib.suppress(OSError, ValueError):
        record = json.loads((work / "pipeline-run.json").read_text(encoding="utf-8"))
    record = record if isinstance(record, dict) else {}
    if record.get("record_error"):
        found.append(
            f"--work {work} holds the record of run {record.get('run_id')} ({work / 'pipeline-run.json'}), its only "
            f"copy: the store refused it. Copy it to {record.get('record_uri')} and remove it from {work}, or give "
            "this run a new --work"
        )
    finished = work / "candidate" / "metrics.json"
    if not finished.is_file():
        return found  # empty, or an interrupted training: the trainer resumes it from its checkpoints
    previous = "an earlier run"
    if "run_id" in record and "outcome" in record:
        previous = f"run {record['run_id']} (outcome: {record['outcome']})"
    return found + [
        f"--work {work} holds the candidate that {previous} trained ({finished}): promotion records may name its "
        "files, and a run there would re-score that model instead of training. Give this run a new --work, or "
        "leave --work out (runs/pipeline/<run id>); to redo a step of that run, rerun its RUN command"
    ]


def missing_inputs(params: dag.Params) -> list[str]:
    """Local files the run reads (paths or file:// URLs) that are not there: drift-check would fail (exit 1 after
    data-check), and a missing load test only at `promote`, after the training. Object-store URIs are left to the
    steps."""
    from training.retry import local_path

    found = []
    for name, value in (
        ("reference", params.reference),
        ("current", params.current),
        ("loadtest", params.loadtest),
    ):
        path = local_path(value) if value else None
        if path is not None and not path.exists():
            found.append(f"--{name} {value} does not exist")
    return found


def store_problems(params: dag.Params) -> list[str]:
    """The promotion store, read as the steps will read it (the champion of --env; `promote` also reads the
    histories of the environments it promotes and takes the load test from). What `python -m promotion` refuses
    there with exit 2 (a file a newer promotion wrote, a damaged one) is refused here too, before any step runs:
    the run used to start, write its own record into that store and exit 1 at data-check. A store that does not
    answer is the steps' to report (exit 1, as before): it may answer by then, and the run says which step failed."""
    from promotion.config import load_config
    from promotion.errors import ConfigError, PromotionError
    from promotion.store import ModelStore

    try:
        env = load_config(None).environment(params.env)
    except ConfigError:
        return []  # problems() names it
    store = ModelStore(params.store, params.model)
    try:
        store.champion(
            env.name
        )  # refuses a damaged record (`created`, which decide-retrain ages it by, included)
        for other in dict.fromkeys(e for e in (env.promote_from, env.loadtest_from) if e):
            store.events(other)
    except PromotionError as exc:
        return [f"the promotion store {params.store}: {exc}"]
    except Exception:  # unreachable, denied, no credentials: each step's own read reports it, exit 1
        return []
    return []


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
    run_id: str | None = None,
) -> dict[str, Any]:
    """Run every step whose conditions hold; returns the pipeline-run record (also written to the store).

    ``commands`` replaces a step's argv (tests fake only the genuinely external image build this way).
    Raises supervise.Refused (a ValueError: bad parameters, WORK in use or taken) before any step runs, and
    KeyboardInterrupt (its argument the record's URI) once the record of a run stopped by SIGINT/SIGTERM is written.
    """
    dag.check()
    commands = commands or {}
    bad = problems(params) + ([] if "drift-check" in commands else missing_inputs(params))
    # Under the CLI's SIGTERM/Ctrl-C handling: a store that hangs here can be stopped (exit 130, nothing written).
    bad = bad or ([] if "data-check" in commands else store_problems(params))
    if bad:
        raise supervise.Refused("; ".join(bad))
    started = dt.datetime.now(dt.UTC)
    run_id = run_id or new_run_id()
    work = Path(params.work)
    lock = supervise.lock(work, run_id, started)
    stop = supervise.Stop()
    restore = stop.install()
    try:  # again under the lock: a run that just left WORK may have finished training there
        bad = work_problems(work)
        if bad:
            raise supervise.Refused("; ".join(bad))
        return _steps(params, commands, echo, run_id, started, lock, stop)
    finally:
        restore()
        os.close(lock)


def _steps(
    params: dag.Params,
    commands: Mapping[str, Sequence[str]],
    echo: Callable[[str], None],
    run_id: str,
    started: dt.datetime,
    lock: int,
    stop: supervise.Stop,
) -> dict[str, Any]:
    work = Path(params.work)
    (work / "decisions").mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    status: dict[str, str] = {}
    steps: list[dict[str, Any]] = []
    conditions: list[dict[str, Any]] = []
    cut: str | None = None  # the first step the interruption kept from running
    for step in dag.STEPS:
        blocked = [d for d in step.depends if status[d] != "succeeded"]
        entry: dict[str, Any] = {"step": step.name}
        # A step the run would have skipped anyway says why; only one that would have run was cut by the signal.
        if blocked:
            status[step.name] = "skipped"
            entry.update(status="skipped", why=", ".join(f"{d} {status[d]}" for d in blocked))
        elif step.when and _flag_file(work, step.when).read_text(encoding="utf-8").strip() != "true":
            status[step.name] = "skipped"
            entry.update(status="skipped", why=f"condition of {step.when} is false")
        elif stop.signal:
            status[step.name] = "skipped"
            entry.update(status="skipped", why="the run was interrupted")
            cut = cut or step.name
        else:
            cmd = list(commands.get(step.name) or argv(step, params, str(_flag_file(work, step.name))))
            echo(f"RUN  {step.name}: {shlex.join(cmd)}")  # copyable: empty values show as ''
            t0 = dt.datetime.now(dt.UTC)
            rc = supervise.execute(python_argv(cmd), work / "logs" / f"{step.name}.log", echo, stop, lock)
            # Told to stop while it ran, it is interrupted whatever it exited with: a step that stops cleanly on
            # SIGTERM (exit 0) has not done its work, and counting it as succeeded made the run's outcome read as a
            # decision ("no retraining needed"). One that had exited before the signal came was not told (Stop).
            interrupted = stop.hit
            if interrupted and rc != EXIT_INTERRUPTED:
                echo(f"     {step.name} exited {rc} after it was told to stop: recorded as interrupted")
                rc = EXIT_INTERRUPTED
            seconds = (dt.datetime.now(dt.UTC) - t0).total_seconds()
            status[step.name] = "succeeded" if rc == 0 else "failed"
            entry.update(status=status[step.name], exit_code=rc, seconds=round(seconds, 1), command=cmd)
            if interrupted:
                entry["why"] = f"interrupted ({stop.signal})"
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
        "outcome": outcome(status, work, interrupted_before=cut and f"{cut} ({stop.signal})"),
    }
    if stop.signal:
        record["interrupted"] = stop.signal
    try:
        record["record_uri"] = write_record(record, params)
    except RecordNotStored as exc:
        record["record_uri"], record["record_error"] = str(work / "pipeline-run.json"), str(exc)
        echo(f"error: {exc}")
    echo(f"outcome: {record['outcome']} (record {record['record_uri']})")
    if stop.signal:
        raise KeyboardInterrupt(record["record_uri"])
    return record


def outcome(status: Mapping[str, str], work: Path, interrupted_before: str | None = None) -> str:
    """What the run came to. `interrupted_before`: the first step a signal kept from running (with the signal),
    which makes every later "skipped" the signal's doing, not the run's decision."""
    failed = [name for name, s in status.items() if s == "failed"]
    rerun = _decision(work, "promote").get("drift_reference_command") if failed == ["promote"] else None
    if rerun:
        # The promotion stood and only its drift reference is missing: "failed at promote" had it promoted again.
        return f"promoted, but its drift reference was not written: {rerun}"
    if failed:
        return f"failed at {failed[0]}"
    if interrupted_before:
        return f"interrupted before {interrupted_before}"
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


def write_record(record: Mapping[str, Any], params: dag.Params) -> str:
    """Stored with its own `record_uri` (the README's shape), beside the promotion records and in WORK."""
    from promotion.evidence import join, write_bytes

    uri = join(params.store, params.model, RECORDS, f"{record['run_id']}.json")
    data = (json.dumps({**record, "record_uri": uri}, indent=2) + "\n").encode()
    # WORK's copy first: a store that refuses the write (down, no permission, a wrong --store) must not cost the
    # run's only account of what ran.
    local = Path(params.work) / "pipeline-run.json"
    local.write_bytes(data)
    try:
        write_bytes(uri, data)
    except Exception as exc:  # any store error: the record is kept in WORK and the run reports it
        error = (
            f"the run's record could not be written to {uri} ({type(exc).__name__}: {exc}); it is in {local}: copy "
            "it there once the store takes writes"
        )
        local.write_text(json.dumps({**record, "record_uri": uri, "record_error": error}, indent=2) + "\n")
        raise RecordNotStored(error) from exc
    return uri


class RecordNotStored(RuntimeError):
    """The pipeline-run record is in WORK only: the store refused it."""


def python_argv(cmd: Sequence[str]) -> list[str]:
    """`python -m ...` with this interpreter (a virtualenv's python need not be first on PATH)."""
    return [sys.executable, *cmd[1:]] if cmd and cmd[0] == "python" else list(cmd)
