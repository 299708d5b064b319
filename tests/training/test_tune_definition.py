"""A resumed study (`tune`, same --output/--study-name) searches what it searched (training/tune_definition.py).

Before: a rerun with another --space or other overrides went on in the same study, and study.json ranked the trials
of both searches together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.test_tune import lr_space, space, study
from training import tune_definition
from training.cli import main
from training.errors import EXIT_OK, EXIT_USAGE

TINY = {"epochs": "1", "data.max_train_rows": "48", "data.max_val_rows": "40"}


def _lr_range(tmp: Path, low: float) -> Path:
    return space(
        tmp,
        {"optim.lr": {"type": "float", "low": low, "high": 1e-2, "log": True, "grid": [3e-3, 5e-3]}},
        **TINY,
    )


def _tune(out: Path, space_file: Path, trials: int, *overrides: str) -> int:
    return main([
        "tune", "--preset", "smoke", "--space", str(space_file), "--output", str(out), "--trials", str(trials),
        "--trial-timeout", "60", "--pruner", "none", "--sampler", "grid", *overrides,
    ])  # fmt: skip


def test_a_resumed_study_refuses_another_space_or_other_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space_file = _lr_range(tmp_path, 1e-3)
    out = tmp_path / "study"
    assert _tune(out, space_file, 1) == EXIT_OK
    assert len(study(out)["trials"]) == 1
    capsys.readouterr()

    assert _tune(out, space_file, 2, "optim.weight_decay=0.05") == EXIT_USAGE
    err = capsys.readouterr().err
    assert "config overrides:" in err and "optim.weight_decay: 0.01 -> 0.05" in err, err
    assert f"--space {space_file}" in err and "its own --output" in err, err

    # A wider lr range: its trials would be sampled from another space than the study's.
    other = tmp_path / "other"
    other.mkdir()
    assert _tune(out, _lr_range(other, 1e-5), 2) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "config --space: study 'sentiment-smoke-smoke' searches something other than this run does" in err
    assert "params optim.lr: {'kind': 'float', 'low': 0.001" in err and "'low': 1e-05" in err, err
    assert len(study(out)["trials"]) == 1  # no trial of another search joined the study

    # The same search resumes, wherever its space file lives; settings of how trials run may change.
    copy = tmp_path / "copy.json"
    copy.write_text(space_file.read_text())
    assert _tune(out, copy, 2, "mlflow=false") == EXIT_OK
    assert [t["state"] for t in study(out)["trials"]] == ["COMPLETE", "COMPLETE"]


def test_the_definition_lives_in_the_study_storage(tmp_path: Path) -> None:
    import optuna

    space_file = lr_space(tmp_path, [3e-3], **TINY)
    out = tmp_path / "study"
    assert _tune(out, space_file, 1, "seed=3") == EXIT_OK
    stored = optuna.load_study(study_name="sentiment-smoke-smoke", storage=f"sqlite:///{out / 'study.db'}")
    recorded = stored.user_attrs["definition"]
    assert recorded["preset"] == "smoke" and recorded["overrides"] == ["seed=3"]
    assert recorded["config"]["seed"] == 3 and recorded["config"]["epochs"] == 1
    assert set(recorded["params"]) == {"optim.lr"} and "checkpoint.every_minutes" not in recorded["config"]
    json.dumps(recorded)  # what another worker reads back


def _worker(tmp: Path, space_file: Path, storage: str, *overrides: str) -> tuple:
    """What `tune` opens and checks, with its own storage object (as another process or pod has)."""
    from training import presets, search_space
    from training.config import apply_overrides
    from training.tune import TuneConfig, open_study

    cfg = TuneConfig(
        preset="smoke", output=tmp / "study", trials=2, trial_timeout_s=60, pruner="none", sampler="grid",
        storage=storage, space_file=space_file, overrides=overrides,
    )  # fmt: skip
    sp = search_space.load("smoke", space_file)
    base = apply_overrides(apply_overrides(presets.get("smoke"), sp.fixed), list(overrides))
    return open_study(cfg, sp, base.name), cfg, sp, base


def _check_together(workers: list[tuple]) -> list[BaseException | None]:
    """Each worker's check, all of them having read the study's definition before any records one.

    The interleaving two pods of one Indexed Job meet when they start together: the gap between the read and
    the write is milliseconds there, so a barrier after each worker's first read makes it happen every time."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from training import tune_definition

    barrier = threading.Barrier(len(workers), timeout=30)

    def read_then_wait(storage: object) -> None:
        read, first = storage.get_study_user_attrs, [True]  # type: ignore[attr-defined]

        def wrapper(study_id: int) -> dict:
            attrs = read(study_id)
            if first[0]:
                first[0] = False
                barrier.wait()
            return attrs

        storage.get_study_user_attrs = wrapper  # type: ignore[attr-defined]

    def run(worker: tuple) -> BaseException | None:
        try:
            tune_definition.check(*worker)
        except Exception as exc:  # noqa: BLE001 - returned for the assertions
            return exc
        return None

    for study_, *_ in workers:
        read_then_wait(study_._storage)
    with ThreadPoolExecutor(len(workers)) as pool:
        return list(pool.map(run, workers))


@pytest.mark.parametrize("trials_before", [0, 1], ids=["new-study", "study-from-before-the-check"])
def test_workers_starting_together_with_different_searches_run_only_one(
    tmp_path: Path, trials_before: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: both read "no definition", both recorded theirs (the last write won) and both ran trials."""
    import optuna

    from training.errors import ConfigError
    from training.tune_definition import ATTR, definition

    storage = f"sqlite:///{tmp_path / 'shared.db'}"  # stands in for the cluster's RDB
    space_file = _lr_range(tmp_path, 1e-3)
    workers = [_worker(tmp_path, space_file, storage), _worker(tmp_path, space_file, storage, "seed=7")]
    for _ in range(trials_before):  # a study made before definitions were recorded
        workers[0][0].add_trial(optuna.trial.create_trial(params={}, distributions={}, value=0.5))

    outcomes = _check_together(workers)

    refused = [o for o in outcomes if o is not None]
    assert len(refused) == 1 and isinstance(refused[0], ConfigError), outcomes
    assert "seed: " in str(refused[0]) and "its own --output" in str(refused[0]), refused[0]
    winner = workers[outcomes.index(None)]
    stored = optuna.load_study(study_name=winner[0].study_name, storage=storage).user_attrs[ATTR]
    assert stored == definition(*winner[1:])  # the study searches what its one running worker searches
    warned = "holds trials but no recorded search" in caplog.text
    assert warned == bool(trials_before), caplog.text


def test_identical_workers_starting_together_all_run(tmp_path: Path) -> None:
    """The Indexed Job's normal start: N pods, one command, one new study."""
    import optuna

    from training.tune_definition import ATTR, definition

    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    space_file = _lr_range(tmp_path, 1e-3)
    workers = [_worker(tmp_path, space_file, storage, "seed=7") for _ in range(3)]
    assert _check_together(workers) == [None, None, None]
    stored = optuna.load_study(study_name=workers[0][0].study_name, storage=storage).user_attrs[ATTR]
    assert stored == definition(*workers[0][1:])


def test_a_study_whose_creator_died_before_recording_is_taken_by_the_next_worker(tmp_path: Path) -> None:
    """Created, no definition, no trials (its creator died in between): nothing to wait for, the next one records."""
    from training import tune_definition
    from training.errors import ConfigError

    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    space_file = _lr_range(tmp_path, 1e-3)
    _worker(tmp_path, space_file, storage, "seed=5")  # the creator, gone before its check
    tune_definition.check(*_worker(tmp_path, space_file, storage))
    with pytest.raises(ConfigError, match="seed: 0 -> 5"):
        tune_definition.check(*_worker(tmp_path, space_file, storage, "seed=5"))


def test_a_study_recorded_by_a_newer_tune_is_refused_naming_its_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newer tune may record more of the search than this one compares (here a `sampler` section): resumed by
    an older image (a rollout), the study used to go on, its differences unchecked. Studies recorded before the
    definition had a format (1838c80 on; checked by hand with that commit's tune) still resume."""
    import optuna

    space_file = lr_space(tmp_path, [3e-3, 5e-3], **TINY)
    out = tmp_path / "study"
    assert _tune(out, space_file, 1) == EXIT_OK
    stored = optuna.load_study(study_name="sentiment-smoke-smoke", storage=f"sqlite:///{out / 'study.db'}")
    recorded = stored.user_attrs["definition"]
    newer = getattr(tune_definition, "FORMAT_VERSION", 1) + 1
    stored.set_user_attr("definition", {**recorded, "format_version": newer, "sampler": {"kind": "cmaes"}})
    capsys.readouterr()

    assert _tune(out, space_file, 2) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"definition format {newer}, written by a newer training" in err, err
    assert f"with an image that reads format {newer}" in err and "Traceback" not in err, err
    assert len(stored.get_trials(deepcopy=False)) == 1  # no trial ran

    del recorded["format_version"]  # as 1838c80 to b16f689 recorded it
    stored.set_user_attr("definition", recorded)
    assert _tune(out, space_file, 2) == EXIT_OK
    assert len(study(out)["trials"]) == 2
