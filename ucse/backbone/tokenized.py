"""Tokenised texts held flat: 4 bytes a token, whatever the number of texts.

The backbone sorts every text by token length before batching, so the whole corpus is tokenised up front.
Kept as the tokenizer returns it (a Python list of Python ints per text and per output, plus the fast
tokenizer's own objects) that cost 5.8 KB per Banking77 text: 570 MiB resident for 100k texts
(docs/RESULTS.md section 5), more than the model. Here each output is one int32 array over all texts with
an offsets array, filled chunk by chunk, so only one chunk's tokenizer objects are alive at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

CHUNK = 4096
"""Texts tokenised per tokenizer call."""


@dataclass
class Tokenized:
    """N unpadded tokenised texts.

    Attributes:
        flat: tokenizer output name (``input_ids``, ``attention_mask``, ``token_type_ids``) -> (total,) int32
            values of every text, one after another.
        offsets: (N + 1,) int64; text i owns ``flat[k][offsets[i]:offsets[i + 1]]``.
    """

    flat: dict[str, np.ndarray]
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        """(N,) token count of each text."""
        return np.diff(self.offsets)

    def ids(self, i: int) -> np.ndarray:
        """(T_i,) token ids of text i (a view)."""
        return self.flat["input_ids"][self.offsets[i] : self.offsets[i + 1]]

    def row(self, i: int) -> dict[str, list[int]]:
        """Text i as the tokenizer would return it unpadded (what ``tokenizer.pad`` takes)."""
        lo, hi = self.offsets[i], self.offsets[i + 1]
        return {k: v[lo:hi].tolist() for k, v in self.flat.items()}


def tokenize(
    tokenize_chunk: Callable[[list[str]], dict[str, Sequence[Sequence[int]]]],
    texts: Sequence[str],
    keys: Sequence[str],
    chunk: int = CHUNK,
) -> Tokenized:
    """Tokenise ``texts`` ``chunk`` at a time into a :class:`Tokenized`.

    Args:
        tokenize_chunk: texts -> the tokenizer's unpadded output (name -> one id list per text).
        texts: N texts.
        keys: the outputs to keep (those the model accepts), ``input_ids`` first.
        chunk: texts per call.
    """
    parts: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    lengths: list[np.ndarray] = []
    for start in range(0, len(texts), chunk):
        enc = tokenize_chunk(list(texts[start : start + chunk]))
        ids = enc["input_ids"]
        lengths.append(np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids)))
        for k in keys:
            if k in enc:
                parts[k].append(np.fromiter((t for row in enc[k] for t in row), dtype=np.int32))
        del enc  # this chunk's tokenizer objects go before the next chunk is made
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(lengths) if lengths else np.zeros(0, np.int64), out=offsets[1:])
    flat = {k: np.concatenate(v) if v else np.zeros(0, np.int32) for k, v in parts.items() if v}
    return Tokenized(flat, offsets)
