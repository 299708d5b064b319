"""The drift job judges the records of the model its reference describes, not another model's.

Found by running `python -m monitoring drift` with a reference built from model version 1 against records that
version 2 wrote (a promotion since the reference was made: nothing rebuilds it) and records of a three-class
model: both gave a verdict, exit 0, without a word, the prediction features measuring the model change rather
than the inputs (two of six features: a promoted model alone could cross the 0.3 threshold and page
ModelInputDrift, or trigger a retraining).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from synthetic_records import record, write

from monitoring import drift, windows
from monitoring.errors import InputError

ROWS = 40


def window(seed: int, n: int = ROWS, **override: object) -> list[dict]:
    rng = random.Random(seed)
    return [record(i, rng, **override) for i in range(n)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("ref") / "reference.jsonl", window(0, 200))


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_drift(capsys: pytest.CaptureFixture[str]) -> Callable[[Path, Path, Path], Done]:
    """The CLI in-process (`python -m monitoring drift`'s main): a subprocess per case paid Evidently's import."""
    from monitoring.cli import main

    def run(ref: Path, cur: Path, out: Path) -> Done:
        code = main(["drift", "--reference", str(ref), "--current", str(cur), "--out", str(out)])
        captured = capsys.readouterr()
        return Done(code, captured.out, captured.err)

    return run


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ({"model_version": "2"}, "every record is of model=sentiment model_version=2, the reference of "
                                 "model=sentiment model_version=1"),
        ({"model": "tickets", "prediction": "neutral"}, "every record is of model=tickets model_version=1"),
    ],
    ids=["promoted-version", "another-model"],
)  # fmt: skip
def test_a_window_of_another_model_is_exit_2_naming_both_and_the_fix(
    reference: Path, tmp_path: Path, override: dict, named: str, run_drift: Callable[..., Done]
) -> None:
    done = run_drift(reference, write(tmp_path / "current.jsonl", window(1, **override)), tmp_path / "out")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and named in done.stderr, done.stderr
    assert "python -m monitoring reference --manifest" in done.stderr
    assert not (tmp_path / "out" / "metrics.prom").exists()  # no verdict is published


def test_a_rollout_window_judges_the_reference_model_and_counts_the_others(
    reference: Path, tmp_path: Path, run_drift: Callable[..., Done]
) -> None:
    old, new = window(1, 30), window(2, 12, model_version="2")
    done = run_drift(reference, write(tmp_path / "current.jsonl", old + new), tmp_path / "out")
    assert done.returncode == 0, done.stdout + done.stderr
    excluded = {"model=sentiment model_version=2": len(new)}
    assert f"left out those of others: {json.dumps(excluded)}" in done.stderr, done.stderr
    report = json.loads((tmp_path / "out" / "drift.json").read_text())
    assert (report["current"]["rows"], report["current"]["excluded"]) == (len(old), excluded)


def test_too_few_records_of_the_reference_model_say_how_many_were_left_out(reference: Path) -> None:
    import pandas as pd

    current = pd.DataFrame(window(1, 5) + window(2, 30, model_version="2"))
    with pytest.raises(InputError, match=r"current: 5 records \(30 of other models left out\) are too few"):
        drift.compute(windows.load(str(reference)), current)


def test_a_reference_without_a_version_is_compared_by_model_only(tmp_path: Path) -> None:
    # An export without --model-version: the reference holds null, serving writes Triton's version folder.
    import pandas as pd

    ref = pd.DataFrame(window(0, 100, model_version=None))
    report = drift.compute(ref, pd.DataFrame(window(1, model_version="1"))).report
    assert report["current"]["rows"] == ROWS and report["current"]["excluded"] == {}
    json.dumps(report)  # still the JSON drift.json is
