"""The minimal text-encoder contract the evaluation layer needs (kept free of any mteb import)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TextEncoder(Protocol):
    """Anything that turns a list of texts into a (N, D) embedding matrix.

    An encoder may also define ``similarity(a, b) -> (N_a, N_b)`` scores between two embedding
    matrices; without it, mteb falls back to cosine similarity. ``similarity`` is not part of the
    runtime check, since it is optional.
    """

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``.

        Args:
            texts: N strings.

        Returns:
            (N, D) float array, one row per text, in input order.
        """
        ...
