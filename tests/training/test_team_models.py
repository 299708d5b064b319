"""A team's own pretrained model folder (XLM-RoBERTa: Unigram tokenizer, `<pad>` = 1, positions numbered from
padding_idx + 1) through `train` and `export`: a data.max_length / --max-length past the model's position table
is refused up front, naming the limit.

Before: config allowed up to 512 tokens whatever the model held, so a model with fewer positions (a RoBERTa's
table holds two fewer tokens than max_position_embeddings says) died mid-training with a traceback (exit 1,
"index 66 is out of bounds") when a text was that long, and when only served texts were, the export passed
parity on short texts and Triton failed every request of each dynamic batch holding a long one.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.training.team_models import TRAIN, xlmr_folder


@pytest.fixture(scope="module")
def xlmr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return xlmr_folder(tmp_path_factory.mktemp("xlmr") / "model")  # 66 embeddings: 64 tokens


def test_position_limit_reads_the_table_and_roberta_offset(xlmr: Path) -> None:
    import transformers

    from training.model import position_limit

    roberta = transformers.AutoModelForSequenceClassification.from_pretrained(xlmr)
    assert position_limit(roberta) == 64
    bert = transformers.BertForSequenceClassification(
        transformers.BertConfig(
            hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8
        )
    )
    assert position_limit(bert) == 512


def test_train_refuses_a_max_length_past_the_position_table(
    xlmr: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from training.cli import main

    source = tmp_path / "es.csv"
    with source.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(("text", "label"))
        for i in range(30):
            text, label = TRAIN[i % len(TRAIN)]
            writer.writerow((f"{text} nº{i}", ("negative", "positive")[label]))
    argv = ["train", "--preset", "smoke", "--output", str(tmp_path / "run"), f"model.name_or_path={xlmr}"]
    argv += [f"data.source={source}", "data.max_length=80"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "config data.max_length: 80 tokens, but the model's position table holds 64" in err, err
    assert not (tmp_path / "run" / "model").exists()


def test_export_refuses_a_max_length_past_the_position_table(xlmr: Path, tmp_path: Path) -> None:
    from training.export import ExportError, export_bundle

    texts = [t for t, _ in TRAIN]
    with pytest.raises(ExportError, match=r"max_length=80: .*holds 64 .*set it to 64 or less"):
        export_bundle(xlmr, tmp_path / "export", texts, None, max_length=80, optimize=False)
    assert not (tmp_path / "export").exists()
