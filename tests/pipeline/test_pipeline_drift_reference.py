"""A local pipeline run that promotes writes the promoted run's drift reference where its drift-check reads it
(`--reference`; promotion's `--drift-reference`): the next run's check used to refuse (exit 2) the new model's window
against the previous model's records.

Real: the local runner (run_cli.start_runner, in its own process and working folder), data-check, decide-retrain,
evaluate (promotion's gates), images (local) and promote (`python -m promotion promote --local-run`), which builds
the reference with monitoring's code from a real ONNX bundle and the run's real data. Replaced: drift-check (writes
its drift.json: no drift), train (copies a finished run of data B, the rescore tests' bundle, into WORK/candidate)
and export (that run is exported already): their work is not what is tested, and training costs minutes.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.run_cli import start_runner
from tests.pipeline.test_pipeline_champion_rescore import (
    LABELS,
    candidate_on_b,
    world,  # noqa: F401 - a fixture
)

pytestmark = pytest.mark.integration


def finished_run(folder: Path, world: dict[str, Any], version: str) -> Path:  # noqa: F811
    candidate_on_b(folder, world, accuracy=0.9)
    shutil.copytree(world["bundle"], folder / "export")
    meta = json.loads((folder / "export" / "metadata.json").read_text())
    meta.update(model_version=version, dataset_manifest_sha256=world["b"].manifest["sha256"])
    (folder / "export" / "metadata.json").write_text(json.dumps(meta))
    return folder


def copies(source: Path, dest: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        f"import shutil; shutil.copytree({str(source)!r}, {str(dest)!r}, dirs_exist_ok=True)",
    ]


def test_a_local_run_that_promotes_writes_the_drift_reference_drift_check_reads(
    tmp_path: Path,
    world: dict[str, Any],  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRAINING_CACHE_DIR", str(world["base"] / "cache"))
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", f"sqlite:///{tmp_path / 'registry.db'}")
    run = finished_run(tmp_path / "run7", world, "7")
    work, reference = tmp_path / "work", tmp_path / "models" / "reference"
    reference.mkdir(parents=True)
    (reference / "reference.jsonl").write_text(
        '{"model": "bag-of-words", "model_version": "6"}\n'
    )  # the last one's
    loadtest = tmp_path / "loadtest.json"
    loadtest.write_text(json.dumps({"results": [{"concurrency": 1, "requests": 50, "rps": 40.0, "p50_ms": 10.0,
                                                 "p95_ms": 15.0, "p99_ms": 20.0, "errors": 0}]}))  # fmt: skip
    # The promotion's default policy report (reports/policy/<stack>.json) in the run's working folder.
    policy = tmp_path / "reports" / "policy" / "dev.json"
    policy.parent.mkdir(parents=True)
    policy.write_text(json.dumps({"stack": "dev", "violations": [], "waived": [], "policies": []}))
    drift = {"drift_detected": False, "score": 0.0, "threshold": 0.3}
    commands = {
        "drift-check": [sys.executable, "-c", f"import json, pathlib; p = pathlib.Path({str(work / 'drift')!r}); "
                        f"p.mkdir(parents=True); (p / 'drift.json').write_text(json.dumps({drift!r}))"],
        "train": copies(run, work / "candidate"),
        "export": [sys.executable, "-c", "pass"],
    }  # fmt: skip
    params = {
        "store": str(tmp_path / "store"), "work": str(work), "reference": f"{reference}/",
        "current": str(tmp_path / "unused"), "loadtest": str(loadtest), "data": str(world["b"].manifest["source"]["uri"]),
        "labels": ",".join(LABELS), "label_column": "label", "preset": "smoke",
    }  # fmt: skip
    proc = start_runner(params, commands, cwd=tmp_path)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out[-4000:]
    assert json.loads((work / "decisions" / "promote.json").read_text())["promoted"] is True, out[-4000:]
    written = [json.loads(line) for line in (reference / "reference.jsonl").read_text().splitlines()]
    assert {r["model_version"] for r in written} == {"7"} and len(written) > 10
    assert json.loads((work / "decisions" / "promote.json").read_text())["drift_reference_written"] is True
    # Said beside the promotion record (written before the reference, never rewritten).
    note = next((tmp_path / "store" / "sentiment" / "records").glob("*.drift-reference.json"))
    assert json.loads(note.read_text())["uri"] == f"{reference}/reference.jsonl"


def test_a_promotion_whose_reference_cannot_be_written_is_recorded_as_promoted_with_the_command(
    tmp_path: Path,
    world: dict[str, Any],  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The step fails (exit 2) but its decision says promoted: `promoted: false` beside "failed at promote" had an
    operator promote again a model that was promoted."""
    from pipeline.cli import main as pipeline_main
    from pipeline.runner import outcome
    from promotion.__main__ import main as promotion_main

    monkeypatch.setenv("TRAINING_CACHE_DIR", str(world["base"] / "cache"))
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", f"sqlite:///{tmp_path / 'registry.db'}")
    monkeypatch.chdir(tmp_path)  # the promotion's default policy report: reports/policy/<stack>.json
    policy = tmp_path / "reports" / "policy" / "dev.json"
    policy.parent.mkdir(parents=True)
    policy.write_text(json.dumps({"stack": "dev", "violations": [], "waived": [], "policies": []}))
    loadtest = tmp_path / "loadtest.json"
    loadtest.write_text(json.dumps({"results": [{"concurrency": 1, "requests": 50, "rps": 40.0, "p50_ms": 10.0,
                                                 "p95_ms": 15.0, "p99_ms": 20.0, "errors": 0}]}))  # fmt: skip
    work = tmp_path / "work"
    run = finished_run(work / "candidate", world, "7")
    blocker = tmp_path / "refs"
    blocker.write_text("a file where the folder should be")
    store = str(tmp_path / "store")
    rc = pipeline_main([
        "step", "promote", "--candidate", str(run), "--store", store, "--model", "sentiment", "--env", "dev",
        "--local", "true", "--loadtest", str(loadtest), "--drift-reference", f"{blocker}/dev/",
        "--out", str(work / "decisions" / "promote.json"),
    ])  # fmt: skip
    assert rc == 2, capsys.readouterr().err
    decision = json.loads((work / "decisions" / "promote.json").read_text())
    assert decision["promoted"] is True and decision["decision"] == "promote", decision
    assert decision["drift_reference_written"] is False
    command = decision["drift_reference_command"]
    assert command.startswith(f"python -m promotion reference --env dev --drift-reference {blocker}/dev/ ")
    assert (
        outcome({"promote": "failed"}, work)
        == f"promoted, but its drift reference was not written: {command}"
    )

    blocker.unlink()
    assert promotion_main(command.split()[3:]) == 0, capsys.readouterr().err
    written = [json.loads(line) for line in (blocker / "dev" / "reference.jsonl").read_text().splitlines()]
    assert {r["model_version"] for r in written} == {"7"}
