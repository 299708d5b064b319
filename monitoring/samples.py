"""Windows of texts for checking the drift job: clean (the test split) and shifted (another domain).

Shifted = sentences of the Python documentation shipped with the interpreter (pydoc_data): English, but
technical prose instead of tweets, longer and with other words; the model never saw that domain.
"""

from __future__ import annotations

import random
import re
from pathlib import Path


def shifted_texts(n: int, seed: int = 0) -> list[str]:
    from pydoc_data.topics import topics

    sentences = [
        s.strip()
        for text in topics.values()
        for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split()))
        if 20 < len(s.strip()) < 300
    ]
    return random.Random(seed).sample(sentences, min(n, len(sentences)))


def clean_texts(manifest: str | Path, n: int, seed: int = 0, *, encoding: str | None = None) -> list[str]:
    """n texts of the manifest's test split (held out from training: same distribution, unseen texts)."""
    from monitoring.reference import split_texts

    texts, _, _ = split_texts(manifest, "test", encoding=encoding)
    return random.Random(seed).sample(texts, min(n, len(texts)))
