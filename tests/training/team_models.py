"""A hub-style model folder of a team's own pretrained model, built in about a second for tests: XLM-RoBERTa
with a SentencePiece Unigram tokenizer trained on Spanish (`<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3, no
token_type_ids), as multilingual-e5 / XLM-R / RoBERTa-BNE folders have them, not the demo's BERT WordPiece."""

from __future__ import annotations

from pathlib import Path

TRAIN = [
    ("¡Me encanta este producto, señor!", 1),
    ("¿Por qué nadie contesta el teléfono?", 0),
    ("La niña está feliz con su regalo de cumpleaños", 1),
    ("El envío llegó roto y tarde, qué desastre", 0),
    ("Qué día tan bonito, el año empieza bien", 1),
    ("Odio esperar tanto: pésimo servicio", 0),
    ("El pingüino del zoológico es una pasada", 1),
    ("Mañana otra vez atasco en la autopista", 0),
]


SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # RoBERTa's ids 0..4


def unigram_tokenizer(texts: list[str]):  # noqa: ANN201 - tokenizers.Tokenizer, imported lazily
    """A SentencePiece-style Unigram tokenizer (XLM-R's kind) trained on `texts`, with `<s> ... </s>` around each."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(
        texts, trainers.UnigramTrainer(vocab_size=150, special_tokens=SPECIALS, unk_token="<unk>")
    )
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return tok


def save_fast(backend, folder: Path):  # noqa: ANN001, ANN201 - tokenizers.Tokenizer -> PreTrainedTokenizerFast
    """Save a tokenizer as a hub folder has it: tokenizer.json, tokenizer_config.json, special tokens."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", cls_token="<s>", sep_token="</s>",
        unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
        model_input_names=["input_ids", "attention_mask"],
    )  # fmt: skip
    fast.save_pretrained(folder)
    return fast


def xlmr_folder(folder: Path, *, max_position_embeddings: int = 66) -> Path:
    """A hub-style XLM-R folder: config.json, model.safetensors, tokenizer.json, tokenizer_config.json."""
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification

    fast = save_fast(unigram_tokenizer([t for t, _ in TRAIN] * 20), folder)
    config = XLMRobertaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_position_embeddings,  # 66: 64 tokens after the offset of padding_idx + 1
        pad_token_id=1,
        type_vocab_size=1,
        id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1},
    )
    torch.manual_seed(0)
    XLMRobertaForSequenceClassification(config).eval().save_pretrained(folder)
    return folder
