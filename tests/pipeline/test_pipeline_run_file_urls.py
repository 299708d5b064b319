"""`python -m pipeline run` with its inputs given as file:// URLs, which the steps read through fsspec like paths.

The up-front check used to skip every value with "://" in it: a missing `file://` input ran data-check and failed
only at drift-check (exit 1), or at `promote` after the training. It now checks the path the URL names
(training.retry.local_path) and still leaves object-store URIs to the steps.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.pipeline.run_cli import kill_session, records, start, wait_for
from tests.pipeline.test_pipeline_run_guards import refused
from training.retry import local_path

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("file:///data/x.jsonl", Path("/data/x.jsonl")),
        ("/data/x.jsonl", Path("/data/x.jsonl")),
        ("data/x.jsonl", Path("data/x.jsonl")),
        ("s3://bucket/x.jsonl", None),
        ("gs://bucket/x.jsonl", None),
        ("az://container/x.jsonl", None),
    ],
)
def test_local_path_names_the_file_a_uri_reads_or_none_for_an_object_store(
    uri: str, path: Path | None
) -> None:
    assert local_path(uri) == path


@pytest.mark.parametrize("missing", ["reference", "current", "loadtest"])
def test_a_missing_file_url_input_is_refused_before_any_step(tmp_path: Path, missing: str) -> None:
    (tmp_path / "loadtest.json").write_text("{}")
    inputs = {**records(tmp_path / "inputs"), "loadtest": str(tmp_path / "loadtest.json")}
    inputs[missing] = f"file://{tmp_path}/nowhere/{missing}"
    work = tmp_path / "work"
    out = refused(tmp_path, "--work", str(work), *(a for k, v in inputs.items() for a in (f"--{k}", v)))
    assert f"error: --{missing} {inputs[missing]} does not exist" in out and not work.exists()


def test_existing_file_url_inputs_pass_the_check_and_the_drift_step_reads_them(tmp_path: Path) -> None:
    work, store = tmp_path / "work", tmp_path / "store"
    (tmp_path / "loadtest.json").write_text("{}")
    inputs = {k: f"file://{v}" for k, v in records(tmp_path / "inputs").items()}
    proc = start("--preset", "smoke", "--store", str(store), "--work", str(work),
                 "--reference", inputs["reference"], "--current", inputs["current"],
                 "--loadtest", f"file://{tmp_path / 'loadtest.json'}")  # fmt: skip
    try:
        wait_for(proc, work / "logs" / "drift-check.log", "drift not detected")  # the real step read them
        proc.send_signal(signal.SIGTERM)  # the rest (training) is not this test's
        out, _ = proc.communicate(timeout=90)
    finally:
        kill_session(proc)
    assert proc.returncode == 130, out
    assert "does not exist" not in out and "RUN  drift-check" in out, out
