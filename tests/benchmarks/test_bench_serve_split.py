"""benchmarks.serve_split on a tiny real bundle (random 2-layer BERT, the real tokenizer and ONNX Runtime), and the
raw ONNX Runtime runner it shares with benchmarks.serve cutting batches as the endpoint does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import serve_split
from benchmarks.serve_common import ort_runner
from serving.options import LENGTH_SPLIT_OVERHEAD_CPU

SHORT_AND_LONG = [
    "ok",
    "the plot of this film wanders from one scene to the next without any reason to care about anybody in it",
]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.export import make_tiny_bundle

    return make_tiny_bundle(
        tmp_path_factory.mktemp("bundle") / "export", seed=0, quantize=True, max_length=64
    )


def test_quick_run_writes_every_cost_for_every_setting(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "split.json"
    assert serve_split.main(["--bundle", str(bundle), "--quick", "--threads", "1", "--costs", "0,8,inf",
                             "--out", str(out)]) == 0  # fmt: skip
    report = json.loads(out.read_text())
    default = f"{LENGTH_SPLIT_OVERHEAD_CPU:g}"
    config = report["config"]
    assert config["costs"] == sorted(["0", "8", default, "inf"], key=float)  # the default is always measured
    assert set(config["bundle"]["sha256"]) >= {"model.onnx", "model.int8.onnx"}
    assert config["batch"] == 8 and config["threads"] == [1] and config["rounds"] == 1 and config["cpu_count"]
    assert set(report["load_average"]) == {"start", "rounds", "end"}
    assert set(report["results"]) == {"fp32", "int8"}
    for precision, by_threads in report["results"].items():
        by_cost = by_threads["1"]
        assert set(by_cost) == set(config["costs"])
        for row in by_cost.values():
            assert len(row["cpu_ms_per_text_rounds"]) == len(row["wall_ms_per_text_rounds"]) == 1
            assert row["cpu_ms_per_text"] > 0 and row["wall_ms_per_text"] > 0
            # int8's answers move a little with the cut (dynamic quantization scales each call's activations).
            if precision == "fp32":
                assert row["max_abs_logit_diff_vs_padded"] < 1e-4 and row["labels_changed_vs_padded"] == 0
        calls = {cost: row["calls_per_batch"] for cost, row in by_cost.items()}
        assert calls["inf"] == 1.0, "cost inf is one padded batch: one call per batch"
        assert calls["0"] == max(calls.values()) and calls["0"] > 1.0, calls
        tokens = {cost: row["computed_tokens_per_text"] for cost, row in by_cost.items()}
        assert tokens["0"] == min(tokens.values()) and tokens["inf"] == max(tokens.values()), tokens
        best = report["best"][f"{precision}, 1 threads"]
        assert best["best_cost"] in by_cost and isinstance(best["default_cuts_as_best"], bool)
    status = report["status"]["length_split_overhead_cpu"]
    assert {"target", "measured", "met"} <= set(status) and isinstance(status["met"], bool)
    assert status["default"] == LENGTH_SPLIT_OVERHEAD_CPU
    assert set(status["by_setting"]) == {"fp32, 1 threads", "int8, 1 threads"}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--costs", "8,-1"], "negative"),
        (["--costs", "eight"], "not a number"),
        (["--threads", "0"], "positive thread counts"),
        (["--texts", "4"], "fewer than one batch"),
    ],
)
def test_bad_arguments_exit_2_with_the_fix(
    bundle: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        serve_split.main(["--bundle", str(bundle), "--out", "/nonexistent/x.json", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_bundle_without_int8_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "metadata.json").write_text("{}")
    (tmp_path / "model.onnx").write_bytes(b"")
    with pytest.raises(SystemExit) as exc:
        serve_split.main(["--bundle", str(tmp_path)])
    assert exc.value.code == 2
    assert "model.int8.onnx" in capsys.readouterr().err


def test_raw_runner_answers_each_text_as_if_it_ran_alone(bundle: Path) -> None:
    # The bundle's tokenizer.json pads every batch to its longest text; left on, the short text's attention mask
    # covered the padding and the batch was never cut (every row the same length).
    run = ort_runner(bundle, "fp32", 1)
    together = run(SHORT_AND_LONG)
    alone = np.vstack([run([text]) for text in SHORT_AND_LONG])
    assert np.abs(together - alone).max() < 1e-6
