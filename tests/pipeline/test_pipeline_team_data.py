"""A team's own dataset through the pipeline: its columns and class names reach every step that reads the data.

The DAG used to pass only `--data`: a team's CSV (columns `texto`/`categoria`, classes "Técnico"/"Facturación") was
read with the demo's columns and classes, so `data-check` ended in a traceback and `train` could not be told the
class names at all (0/1 labels came out named negative/positive).
"""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import dag, runner

ROOT = Path(__file__).resolve().parents[2]
LABELS = ("Técnico", "Facturación")  # not alphabetical, accented, capitalised
WORDS = (
    ["error", "crash", "login", "bug", "server", "timeout"],
    ["invoice", "refund", "charge", "payment", "bill", "price"],
)


def team_csv(path: Path, rows: int = 600) -> Path:
    rng = random.Random(0)
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["texto", "categoria"])
        for i in range(rows):
            k = rng.randrange(len(LABELS))
            out.writerow([f"ticket {i} " + " ".join(rng.choice(WORDS[k]) for _ in range(6)), LABELS[k]])
    return path


def step_argv(name: str, params: dag.Params, tmp_path: Path) -> list[str]:
    return runner.argv(dag.step(name), params, str(tmp_path / f"{name}.flag"))


def run_step(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    assert argv[:2] == ["python", "-m"]
    return subprocess.run(
        [sys.executable, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "TRAINING_MLFLOW": "0", "PYTHONPATH": str(ROOT), "TRAINING_CACHE_DIR": str(cwd / "cache")},
    )  # fmt: skip


@pytest.mark.integration
def test_a_team_dataset_trains_with_its_own_columns_and_classes(tmp_path: Path) -> None:
    data = team_csv(tmp_path / "tickets.csv")
    params = dag.Params(
        preset="smoke", data=str(data), labels=",".join(LABELS), text_column="texto", label_column="categoria",
        model="tickets", store=str(tmp_path / "store"), work=str(tmp_path / "work"),
    )  # fmt: skip
    assert runner.problems(params) == []

    checked = run_step(step_argv("data-check", params, tmp_path), tmp_path)
    assert checked.returncode == 0, checked.stderr[-3000:]
    manifest_sha = json.loads((tmp_path / "work" / "decisions" / "data-check.json").read_text())[
        "manifest_sha256"
    ]

    trained = run_step(step_argv("train", params, tmp_path), tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    candidate = tmp_path / "work" / "candidate"
    manifest = json.loads((candidate / "manifest.json").read_text())
    assert manifest["labels"] == list(LABELS)
    assert manifest["text_column"] == "texto" and manifest["label_column"] == "categoria"
    assert sum(manifest["splits"]["train"]["label_counts"].values()) > 0
    # data-check hashed the data the candidate trained on: the retrain decision compares like with like.
    assert json.loads((candidate / "metrics.json").read_text())["dataset_manifest_sha256"] == manifest_sha

    # A champion of the same classes numbered otherwise (and far weaker): not comparable, so the candidate does not
    # win on its metric. The evaluate step used to compare them as one task.
    model = tmp_path / "store" / "tickets"
    (model / "records").mkdir(parents=True)
    (model / "environments").mkdir()
    champion = {"record_id": "champion-fixture", "created": "2026-12-01T00:00:00Z",
                "lineage": {"labels": [LABELS[1], LABELS[0]], "metrics": {"test": {"accuracy": 0.1}}}}  # fmt: skip
    (model / "records" / "champion-fixture.json").write_text(json.dumps(champion))
    event = {"action": "promote", "version": "1", "record_id": "champion-fixture", "serving_image": None}
    (model / "environments" / "dev.json").write_text(json.dumps({"environment": "dev", "events": [event]}))
    judged = run_step(step_argv("evaluate", params, tmp_path), tmp_path)
    assert judged.returncode == 0, judged.stderr[-3000:]
    decision = json.loads((tmp_path / "work" / "decisions" / "evaluate.json").read_text())
    gate = next(g for g in decision["gates"] if g["name"] == "not-worse-than-champion")
    assert decision["wins"] is False and "another class-id order" in gate["detail"]

    # The export step's argv, as training's own parser reads it: the overrides must sit where it takes them.
    from training.cli import parser as training_parser

    export = step_argv("export", params, tmp_path)
    parsed = training_parser().parse_args(export[3:])
    assert parsed.overrides == [f"data.labels={','.join(LABELS)}", "data.text_column=texto",
                                "data.label_column=categoria"]  # fmt: skip
    assert str(parsed.data) == str(data)


def test_data_parameters_training_refuses_stop_the_run_first(tmp_path: Path) -> None:
    """An empty or repeated class name is refused with the pipeline's flag before any step runs."""
    for labels, message in (
        ("billing,,Billing", "--labels: config data.labels"),
        ("", "--labels: config data.labels"),
    ):
        found = runner.problems(dag.Params(labels=labels, store=str(tmp_path / "store")))
        assert any(message in p for p in found), found


@pytest.mark.integration
def test_data_check_names_the_pipeline_parameters_instead_of_a_traceback(tmp_path: Path) -> None:
    data = team_csv(tmp_path / "tickets.csv", rows=50)
    params = dag.Params(
        preset="smoke", data=str(data), store=str(tmp_path / "store"), work=str(tmp_path / "work")
    )
    checked = run_step(step_argv("data-check", params, tmp_path), tmp_path)
    assert checked.returncode == 2, checked.stderr[-3000:]
    assert "Traceback" not in checked.stderr
    assert "missing column(s) text" in checked.stderr and "--text-column" in checked.stderr


def test_render_carries_the_team_s_model_and_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`render` baked the demo's data and the name `sentiment` into every workflow: a team could not set them."""
    import yaml

    from pipeline.cli import main

    image = "reg.example/training@sha256:" + "a" * 64
    team = ["--model", "tickets", "--data", "s3://team/tickets.csv", "--labels", ",".join(LABELS),
            "--text-column", "texto", "--label-column", "categoria"]  # fmt: skip
    assert main(["render", "--training-image", image, *team, "--out", str(tmp_path)]) == 0
    docs = list(yaml.safe_load_all((tmp_path / "retrain-dev.yaml").read_text(encoding="utf-8")))
    template = next(d for d in docs if d["kind"] == "WorkflowTemplate")
    values = {p["name"]: p["value"] for p in template["spec"]["arguments"]["parameters"]}
    assert values["model"] == "tickets" and values["data"] == "s3://team/tickets.csv"
    assert values["labels"] == ",".join(LABELS)
    assert (values["text-column"], values["label-column"]) == ("texto", "categoria")

    capsys.readouterr()
    assert main(["render", "--training-image", image, "--labels", "billing,Billing"]) == 2
    assert "--labels: config data.labels" in capsys.readouterr().err


@pytest.mark.integration
def test_the_drift_check_labels_its_gauges_with_the_team_s_model(tmp_path: Path) -> None:
    """drift-check pushed ml_drift_* as model="sentiment" whatever --model was: ModelInputDrift named the demo."""
    from tests.monitoring.synthetic_records import record, write

    rng = random.Random(0)
    reference = write(
        tmp_path / "reference.jsonl", [record(i, rng, prediction=LABELS[i % 2]) for i in range(60)]
    )
    current = write(tmp_path / "current.jsonl", [record(i, rng, prediction=LABELS[i % 2]) for i in range(60)])
    params = dag.Params(
        model="tickets", reference=str(reference), current=str(current), work=str(tmp_path / "work")
    )
    done = run_step(step_argv("drift-check", params, tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    prom = (tmp_path / "work" / "drift" / "metrics.prom").read_text()
    assert 'ml_drift_score{model="tickets"}' in prom and "sentiment" not in prom
