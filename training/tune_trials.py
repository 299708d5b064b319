"""Where a study's trials keep their checkpoints, and what another study left there.

A trial is a training run, and a training run resumes from whatever checkpoints its folder holds: that is how a
preempted trial continues. So a trial must never find checkpoints that are not its own, or it "resumes" them, a
finished one as a no-op, and reports their score under its own parameters (study.json's best_params then name
parameters that were never trained, and DIR/model is another trial's model).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from training.errors import ConfigError, StorageUnavailable

log = logging.getLogger("training.tune")


def with_checkpoint_prefix(cfg: Any, base: Any) -> Any:
    """`cfg` whose checkpoint_uri is the trials' prefix: --checkpoint-uri, else a `checkpoint.uri=` override or
    $TRAINING_CHECKPOINT_URI (the image's "where checkpoints go"), each trial below it in trial-<number>/.

    Taken as is, the override or the variable was one checkpoint store for every trial: trial 1 resumed trial 0's
    finished checkpoint and reported trial 0's score as its own.
    """
    from training import environment as env

    if cfg.checkpoint_uri:
        return cfg
    prefix = base.checkpoint.uri or env.TRAINING_CHECKPOINT_URI.get()
    return dataclasses.replace(cfg, checkpoint_uri=prefix) if prefix else cfg


def refuse_leftovers(cfg: Any, study: Any) -> None:
    """Exit 2 when the trial folders (DIR/trials/<n>, <checkpoint prefix>/trial-<n>) hold a trial this study does
    not have: another study's (another --study-name or --preset, or a study.db deleted to start over)."""
    prefix_flag = "--checkpoint-uri (or checkpoint.uri, $TRAINING_CHECKPOINT_URI)"
    places = [(str(cfg.output / "trials"), "", "--output")]
    if cfg.checkpoint_uri:
        places.append((cfg.checkpoint_uri.rstrip("/"), "trial-", prefix_flag))
    # Listed before the study is read: a trial another worker asks for meanwhile is in the study by then.
    found = [(root, flag, prefix, name) for root, prefix, flag in places for name in _listed(root, prefix)]
    known = {t.number for t in study.get_trials(deepcopy=False)}
    strangers = [
        (root, flag, name) for root, flag, prefix, name in found if int(name[len(prefix) :]) not in known
    ]
    if not strangers:
        return
    root, flag, _ = strangers[0]
    names = [name for r, _, name in strangers if r == root]
    raise ConfigError(
        flag,
        f"{root} holds trial folders {', '.join(names[:5])}{' ...' if len(names) > 5 else ''} of trials that "
        f"study {study.study_name!r} does not have (another study's, or a study whose storage was deleted): this "
        "study's trials of the same numbers would resume their checkpoints and report their scores under new "
        f"parameters. Give this study a new {flag}, delete those folders, or continue the study that made them "
        "(its --study-name, --preset and --storage)",
    )


def _listed(root: str, prefix: str) -> list[str]:
    from training import checkpoint as ckpt

    if "://" not in root and not Path(root).is_dir():
        return []  # a local Store would create it: a study refused later must leave no trials/ behind
    try:
        return ckpt.Store(root).dirs(prefix)
    except StorageUnavailable as exc:
        # The trial meets the same outage and is left RUNNING for this worker's rerun (exit 69), which checks
        # again; refusing here would only move that exit before the trial.
        log.warning("cannot check %s for another study's trials: %s", root, exc)
        return []
