"""What a study searches, recorded in its storage, and the check that a resumed study still searches it.

A study is resumed by running the same `tune` command again (after exit 75, a new pod of the Indexed Job, or to
add --trials). Before this check a rerun with another --space or other key=value overrides went on in the same
study: its trials, trained under another space or config, were ranked with the old ones in study.json (best_params
could name a trial of either search), and the sampler learned from both. Now the study's storage holds its
definition (study user attribute "definition"): the preset, the effective trial config (preset + the space's fixed
overrides + the user's overrides; the keys that decide the trained model, training/rerun.py decides_result), and the
preset's search space (params and pruning). A rerun whose definition differs exits 2 before any trial, naming what
differs and the fix; the same one goes on. Workers starting together on a new study (an Indexed Job's pods) each
try to insert theirs: exactly one gets in, and the others are checked against it as a rerun is. The space's
eur_per_usd (the budget's exchange rate) and settings of how trials run or report (export, mlflow, checkpoint.*,
cost fields) may change.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from training.errors import ConfigError, NewerFormatError
from training.rerun import decides_result, same

log = logging.getLogger("training.tune")

ATTR = "definition"
# The definition's layout (its "format_version"; 1 when absent: studies from 1838c80 on). A newer tune that records
# more of the search (a section this one would not compare) bumps it, so this one refuses instead of resuming a
# study whose trials it cannot check.
FORMAT_VERSION = 1


def definition(cfg: Any, space: Any, base: Any) -> dict[str, Any]:
    """This run's search, as the study storage gives it back (JSON: tuples are lists)."""
    return json.loads(
        json.dumps(
            {
                "format_version": FORMAT_VERSION,
                "preset": cfg.preset,
                "config": {k: v for k, v in base.flat().items() if decides_result(k)},
                "params": {p.key: dataclasses.asdict(p) for p in space.params},
                "pruning": dataclasses.asdict(space.pruning),
                # For the message only: how the study's own command spelled its search.
                "space_file": str(cfg.space_file) if cfg.space_file else None,
                "overrides": list(cfg.overrides),
            },
            default=str,
        )
    )


def check(study: Any, cfg: Any, space: Any, base: Any) -> None:
    """Record this run's definition in a new study; exit 2 (ConfigError) when the study holds another one."""
    mine = definition(cfg, space, base)
    theirs = study.user_attrs.get(ATTR)
    if theirs is None:
        had_trials = bool(study.get_trials(deepcopy=False))
        if _record_first(study, mine):
            if had_trials:
                log.warning(
                    "study %r holds trials but no recorded search (made before the check existed): recording "
                    "this run's; its earlier trials cannot be checked against it",
                    study.study_name,
                )
            return
        # Another worker of this study (an Indexed Job's pod, a user sharing the --storage) recorded its own
        # between our read and our insert: the study searches that one, so compare with it like a resume.
        theirs = study.user_attrs[ATTR]
    found = theirs.get("format_version", 1) if isinstance(theirs, dict) else None
    if type(found) is not int:
        raise ConfigError(
            "--study-name",
            f"study {study.study_name!r} holds an unreadable search definition (user attribute {ATTR!r}: "
            f"{str(theirs)[:200]}): give this search its own --output (and --study-name)",
        )
    if found > FORMAT_VERSION:
        raise NewerFormatError(
            f"study {study.study_name!r} records its search in definition format {found!r}, written by a newer "
            f"training; this one reads format {FORMAT_VERSION} and cannot check that this run searches the same: "
            f"run `tune` for this study with an image that reads format {found}, or give this search its own "
            "--output (and --study-name when the --storage is shared)"
        )
    diffs = differences(theirs, mine)
    if not diffs:
        return
    flag = "--space" if any(d.startswith(("params", "pruning")) for d in diffs) else "overrides"
    if theirs.get("preset") != mine["preset"]:
        flag = "--preset"
    own = " ".join(
        [f"--preset {theirs.get('preset')}"]
        + ([f"--space {theirs['space_file']}"] if theirs.get("space_file") else [])
        + list(theirs.get("overrides") or [])
    )
    raise ConfigError(
        flag,
        f"study {study.study_name!r} searches something other than this run does: {'; '.join(diffs[:8])}"
        f"{' ...' if len(diffs) > 8 else ''}. Its trials and this run's would be ranked together in study.json "
        f"and the sampler would learn from both. Resume it with its own search ({own}), or give the new search "
        "its own --output (and its own --study-name when the --storage is shared)",
    )


def differences(theirs: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    """`what: study's -> this run's`, for each difference that changes what the trials train."""
    out = []
    if theirs.get("preset") != mine["preset"]:
        out.append(f"preset: {theirs.get('preset')} -> {mine['preset']}")
    for section in ("params", "config"):
        old, new = theirs.get(section) or {}, mine[section]
        for key in sorted(set(old) | set(new)):
            if not same(old.get(key), new.get(key)):
                label = f"{section} {key}" if section == "params" else key
                out.append(f"{label}: {_show(old.get(key))} -> {_show(new.get(key))}")
    if not same(theirs.get("pruning"), mine["pruning"]):
        out.append(f"pruning: {_show(theirs.get('pruning'))} -> {_show(mine['pruning'])}")
    return out


def _show(value: Any) -> str:
    if isinstance(value, dict) and "kind" in value:  # a search-space parameter: only what is set
        value = {k: v for k, v in value.items() if k != "key" and v not in (None, (), [], False)}
    return "(none)" if value is None else str(value)


def _record_first(study: Any, mine: dict[str, Any]) -> bool:
    """Insert the study's definition unless one is there; True when this run's went in.

    Optuna's set_user_attr overwrites: two fresh workers with different searches both read "none", both wrote,
    and both ran trials in one study under the last writer's definition. The storage's unique (study_id, key)
    lets exactly one insert in, on SQLite and on the cluster's RDB alike, whoever created the study and whenever
    (a worker that died after creating it leaves the insert to the next one). The table is Optuna's persisted
    schema (changed only by its migrations); the tests insert into a real one.
    """
    import sqlalchemy as sa
    from sqlalchemy.exc import IntegrityError

    # create_study wraps the RDBStorage (tune.py _storage) in a cache; study user attributes pass through it.
    storage = getattr(study._storage, "_backend", study._storage)
    table = sa.table("study_user_attributes", *(sa.column(c) for c in ("study_id", "key", "value_json")))
    row = {"study_id": study._study_id, "key": ATTR, "value_json": json.dumps(mine)}
    try:
        with storage.engine.begin() as connection:
            connection.execute(table.insert().values(**row))
    except IntegrityError:
        return False
    return True
